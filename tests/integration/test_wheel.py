"""Packaging, checked fast in the suite (the wheel itself is built and installed into a fresh venv by
scripts/wheel_check.sh, which CI runs before pytest):

* setup.py's discovery finds every package folder of the source tree, under its import name (read
  off the Distribution setuptools builds from setup.py, stopped before any command runs);
* scripts/install.sh's decisions (DRY_RUN=1) on a fake CUDA image with Python 3.12: it keeps the
  image's torch, refuses torch < 2.6 and an unsupported Python, and writes nothing.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import setuptools  # noqa: F401  (provides distutils on Python 3.12, where the standard library has none)

REPO = Path(__file__).resolve().parents[2]
IMPORT_NAMES = {"common": "longformer_common", "fairseq_longformer": "fairseq_longformer", "kernels": "longformer_kernels",
                "preprocessing": "longformer_preprocessing", "tools": "longformer_tools",
                "experiments": "longformer_experiments"}


def _source_packages():
    """Every folder with an __init__.py under the mapped folders, as a dotted import name."""
    found = set()
    for folder, name in IMPORT_NAMES.items():
        root = REPO / folder
        if not (root / "__init__.py").is_file():
            continue
        for init in root.rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            # a package only if every folder on the way is one (as Python imports it)
            if all((root.joinpath(*parts[:i + 1]) / "__init__.py").is_file() for i in range(len(parts))):
                found.add(".".join((name,) + parts))
    return found


def test_setup_finds_every_package_folder():
    from distutils.core import run_setup

    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        dist = run_setup(str(REPO / "setup.py"), script_args=["--name"], stop_after="init")
    finally:
        os.chdir(cwd)
    assert set(dist.packages) == _source_packages()
    assert "longformer_tools.report" in dist.packages  # once missed by a hand-written list
    for package in dist.packages:
        folder = REPO / dist.package_dir.get(package, package.replace(".", "/"))
        assert (folder / "__init__.py").is_file(), (package, folder)
    assert any(r.startswith("torch>=2.6") for r in dist.install_requires)
    assert dist.python_requires == ">=3.10,<3.13"
    scripts = dict(e.split(" = ") for e in dist.entry_points["console_scripts"])
    assert scripts["longformer-user-dir"] == "fairseq_longformer.cli.train:print_user_dir"


def _fake_python(tmp_path, torch_version, cuda):
    """A `python3.12` whose `import torch` is a stand-in with the given version and CUDA."""
    fake = tmp_path / f"fake-{torch_version}"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        f"__version__ = {torch_version!r}\nclass version:\n    cuda = {cuda!r}\n")
    python = fake / "python3.12"
    python.write_text(f"#!/usr/bin/env bash\nPYTHONPATH={fake} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return python


def _dry_run(tmp_path, python):
    venv = tmp_path / "venv"
    env = dict(os.environ, DRY_RUN="1", VENV=str(venv), PYTHON=str(python))
    run = subprocess.run(["bash", str(REPO / "scripts" / "install.sh")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert not venv.exists(), "a dry run must write nothing"
    return run


def test_install_keeps_a_cuda_images_torch(tmp_path):
    run = _dry_run(tmp_path, _fake_python(tmp_path, "2.11.0+cu130", "13.0"))
    assert run.returncode == 0, run.stderr
    assert "--system-site-packages" in run.stdout and "keeping torch 2.11.0+cu130 (CUDA 13.0)" in run.stdout
    assert "pip install" not in run.stdout.split("would pin")[0]  # no torch install of any kind
    assert "torch==2.11.0+cu130" in run.stdout


def test_install_refuses_old_torch_and_unsupported_python(tmp_path):
    run = _dry_run(tmp_path, _fake_python(tmp_path, "2.5.1+cu124", "12.4"))
    assert run.returncode == 1 and "CVE-2025-32434" in run.stderr and "2.5.1" in run.stderr
    bad = tmp_path / "python3.9"
    bad.write_text("#!/usr/bin/env bash\n[[ \"$1\" == -c ]] && echo 3.9 && exit 0\nexit 1\n")
    bad.chmod(0o755)
    run = _dry_run(tmp_path, bad)
    assert run.returncode == 1 and "Python 3.9" in run.stderr and "3.10, 3.11 or 3.12" in run.stderr


@pytest.mark.parametrize("script", ["install.sh", "test.sh", "wheel_check.sh", "gpu_check.sh", "gpu_round.sh"])
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / script)]).returncode == 0
