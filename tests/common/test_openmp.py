"""OpenMP's wait policy is the user's: no command's process and no recipe sets one (libgomp's
default stands), and a user's own OMP_WAIT_POLICY / GOMP_SPINCOUNT reaches torch and the
command's children as given (docs/cpu.md). What is set, not how fast it makes anything."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WAIT_POLICY = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in WAIT_POLICY}
    env.update(extra)
    return env


# argv: the variables' names, a package. Prints the variables at torch's first import, after the
# package's import, and in a child process the package's process starts.
PROBE = """
import builtins, importlib, json, os, subprocess, sys
names = sys.argv[1].split(",")
def policy():
    return {name: os.environ.get(name) for name in names}
seen = {}
real = builtins.__import__
def spy(name, *args, **kwargs):
    if name == "torch" and "torch" not in seen:
        seen["torch"] = policy()
    return real(name, *args, **kwargs)
builtins.__import__ = spy
importlib.import_module(sys.argv[2])
child = subprocess.run([sys.executable, "-c", sys.argv[3], sys.argv[1]], capture_output=True, text=True, check=True)
print(json.dumps([seen.get("torch"), policy(), json.loads(child.stdout)]))
"""
CHILD = "import json, os, sys; print(json.dumps({n: os.environ.get(n) for n in sys.argv[1].split(',')}))"


@pytest.mark.parametrize("package", ["longformer_tools.cli.bench", "fairseq_longformer"])
def test_a_command_process_sets_none_and_passes_the_users_through(package):
    unset = dict.fromkeys(WAIT_POLICY)
    mine = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "5", "KMP_BLOCKTIME": None}
    for given, expected in ((_clean_env(), unset), (_clean_env(OMP_WAIT_POLICY="PASSIVE", GOMP_SPINCOUNT="5"), mine)):
        out = subprocess.run([sys.executable, "-c", PROBE, ",".join(WAIT_POLICY), package, CHILD], env=given,
                             capture_output=True, text=True, cwd=REPO, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        at_torch, after, child = json.loads(out.stdout.splitlines()[-1])
        assert at_torch == after == child == expected


def test_no_recipe_or_script_sets_a_wait_policy():
    """fairseq-train and the other commands the recipes run see the user's environment as given."""
    sets = re.compile(r"^\s*(?:export\s+)?(?:OMP_WAIT_POLICY|GOMP_SPINCOUNT|KMP_BLOCKTIME)=", re.M)
    files = [path for folder, pattern in (("recipes", "*.sh"), ("recipes", "*.sbatch"), ("scripts", "*.sh"))
             for path in (REPO / folder).rglob(pattern)]
    assert files
    assert [str(f.relative_to(REPO)) for f in files if sets.search(f.read_text())] == []
    assert not (REPO / "recipes" / "openmp_env.sh").exists()
