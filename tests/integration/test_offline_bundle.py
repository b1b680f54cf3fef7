"""scripts/offline_bundle.py, the offline install for the GPU image, exercised here with the
Python 3.11 wheels: the same gather and install steps the GPU machine runs with cp312 ones."""
import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "offline_bundle.py"
WHEELHOUSE = Path(sys.executable).parent.parent / "wheelhouse"  # install.sh's fairseq-fixed wheel


def _script():
    spec = importlib.util.spec_from_file_location("offline_bundle", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundle_holds_what_the_image_lacks():
    """What fairseq-fixed and fairseq-longformer[hf] need (from this environment's installed
    metadata, not following packages the image has) minus the image's packages is the bundle."""
    bundle = _script()
    errors = []
    image = bundle.image_packages()
    needed = bundle._requirement_closure(errors, stop_at=image)
    assert not errors
    assert "torch" in image and "transformers" in image
    assert needed - image == {bundle._key(bundle._name(s)) for s in bundle.BUNDLE} | {"fairseq-longformer"}


def test_offline_install_with_python311_wheels(tmp_path):
    """gather (fairseq-fixed from the wheelhouse, the rest from the registry), then install into a
    new environment on top of this interpreter's torch: fairseq and the project import from it,
    the extensions this project uses load, every console script imports (the script's check)."""
    gather = subprocess.run([sys.executable, str(SCRIPT), "gather", str(tmp_path / "bundle"), "--python-version",
                             "3.11", "--find-links", str(WHEELHOUSE)], capture_output=True, text=True)
    assert gather.returncode == 0, gather.stdout + gather.stderr
    assert "fairseq_fixed-0.12.3.1-cp311-cp311-linux_x86_64.whl" in gather.stdout  # reused, not downloaded
    install = subprocess.run([sys.executable, str(SCRIPT), "install", str(tmp_path / "bundle"), str(tmp_path / "site")],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "extension fairseq.data.token_block_utils_fast: loads" in install.stdout
    assert "console scripts import: fairseq-eval-lm" in install.stdout
    site = tmp_path / "site" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert (site / "fairseq_longformer" / "__init__.py").is_file() and (site / "fairseq" / "__init__.py").is_file()
    assert not (site / "torch").exists()  # the interpreter's, seen through the environment's .pth
    assert (tmp_path / "site" / "bin" / "longformer-train").read_text().startswith(f"#!{tmp_path / 'site'}/bin/python")


def test_install_without_a_bundle_says_so(tmp_path, capsys):
    assert _script().main(["install", str(tmp_path / "nowhere"), str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run 'gather" in err[0]
    assert not (tmp_path / "site").exists()
