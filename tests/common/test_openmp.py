"""OpenMP's wait policy (``longformer_common/openmp.py``, ``recipes/openmp_env.sh``): set in every
command's process before torch loads libgomp, exported by the recipes, and never over the
user's own choice. What it is set to, not how fast it makes anything."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longformer_common import openmp

REPO = Path(__file__).resolve().parents[2]
CHOICES = openmp.USER_CHOICES


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in CHOICES}
    env.update(extra)
    return env


def test_defaults_fill_an_empty_environment_and_leave_a_users_choice():
    environ = {}
    assert openmp.apply_defaults(environ) == openmp.DEFAULTS and environ == openmp.DEFAULTS
    for name in CHOICES:
        mine = {name: "PASSIVE" if name == "OMP_WAIT_POLICY" else "7"}
        assert openmp.apply_defaults(mine) == {} and list(mine) == [name]


def test_torch_links_libgomp_whose_knob_is_set():
    """The default is GOMP_SPINCOUNT because torch's CPU build links GNU libgomp."""
    torch_lib = Path(__import__("torch").__file__).parent / "lib"
    if not (torch_lib / "libgomp.so.1").exists() and not list(torch_lib.glob("libgomp*")):
        pytest.skip("this torch does not ship libgomp")
    assert "GOMP_SPINCOUNT" in openmp.DEFAULTS


@pytest.mark.parametrize("package", ["longformer_tools.cli.bench", "fairseq_longformer"])
def test_a_command_process_has_it_before_torch_is_loaded(package):
    probe = ("import builtins, os, sys\n"
             "seen = {}\n"
             "real = builtins.__import__\n"
             "def spy(name, *a, **k):\n"
             "    if name == 'torch' and 'torch' not in seen:\n"
             "        seen['torch'] = os.environ.get('GOMP_SPINCOUNT')\n"
             "    return real(name, *a, **k)\n"
             "builtins.__import__ = spy\n"
             f"import {package}\n"
             "print(seen.get('torch'), os.environ.get('GOMP_SPINCOUNT'))\n")
    out = subprocess.run([sys.executable, "-c", probe], env=_clean_env(), capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    at_torch, after = out.stdout.split()[-2:]
    assert at_torch == after == openmp.DEFAULTS["GOMP_SPINCOUNT"]
    mine = subprocess.run([sys.executable, "-c", f"import os, {package}; print(os.environ.get('GOMP_SPINCOUNT'))"],
                          env=_clean_env(OMP_WAIT_POLICY="PASSIVE"), capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert mine.stdout.split()[-1] == "None"  # the user's policy stands; nothing added beside it


def _sourced(env) -> str:
    script = f'source "{REPO}/recipes/openmp_env.sh"; echo "${{GOMP_SPINCOUNT:-unset}}"'
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_the_recipes_export_the_same_default_and_keep_the_users():
    assert _sourced(_clean_env()) == openmp.DEFAULTS["GOMP_SPINCOUNT"]
    assert _sourced(_clean_env(OMP_WAIT_POLICY="PASSIVE")) == "unset"
    assert _sourced(_clean_env(GOMP_SPINCOUNT="5")) == "5"


@pytest.mark.parametrize("recipe", ["quickstart.sh", "common.sh", "charlm_common.sh", "project_python.sh"])
def test_every_training_launcher_sources_it(recipe):
    """quickstart.sh, the pretraining launchers (common.sh), the char-LM recipes and every recipe
    that finds the project's Python (fine-tuning, LED) source recipes/openmp_env.sh."""
    assert 'source "$REPO/recipes/openmp_env.sh"' in (REPO / "recipes" / recipe).read_text()
