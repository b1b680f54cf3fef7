"""The thread policy (``longformer_common.threads``): an explicit --threads N wins, then
OMP_NUM_THREADS, then auto (--threads auto or LONGFORMER_THREADS=auto), then the command's
default; auto gives the free cores, never more than torch's own count."""
import argparse
import os
import subprocess
from pathlib import Path

import pytest

from longformer_common import free_cores, threads
from longformer_common.errors import UserInputError


@pytest.mark.parametrize("requested, environ, expected", [
    (3, {"OMP_NUM_THREADS": "1", "LONGFORMER_THREADS": "auto"}, (False, 3, "--threads")),
    ("auto", {"OMP_NUM_THREADS": "1"}, (False, 1, "OMP_NUM_THREADS")),
    (None, {"OMP_NUM_THREADS": "4,2", "LONGFORMER_THREADS": "auto"}, (False, 4, "OMP_NUM_THREADS")),
    (None, {"OMP_NUM_THREADS": "lots"}, (False, None, "OMP_NUM_THREADS")),
    ("auto", {}, (True, None, "--threads")),
    (None, {"LONGFORMER_THREADS": "AUTO"}, (True, None, "LONGFORMER_THREADS")),
    (None, {}, (False, 2, "default")),
])
def test_precedence(requested, environ, expected):
    policy = threads.choose(requested, default=2, environ=environ)
    assert (policy.auto, policy.count, policy.source) == expected


def test_a_fixed_count_is_used_as_is_and_none_means_torchs(monkeypatch):
    monkeypatch.setattr(free_cores, "free_cores", lambda interval=0.2: pytest.fail("a fixed count measures nothing"))
    assert threads.choose(5, environ={}).threads(most=2) == 5  # an explicit count is the user's, even above torch's
    assert threads.choose(None, environ={}).threads(most=3) == 3


@pytest.mark.parametrize("free, most, expected", [(1, 2, 1), (2, 2, 2), (8, 2, 2), (0, 2, 1)])
def test_auto_is_the_free_cores_at_most_torchs_count(monkeypatch, free, most, expected):
    monkeypatch.setattr(free_cores, "free_cores", lambda interval=0.2: free)
    assert threads.choose("auto", environ={}).threads(most=most) == expected


def test_longformer_threads_takes_only_auto():
    with pytest.raises(UserInputError, match="LONGFORMER_THREADS='3'.*OMP_NUM_THREADS"):
        threads.choose(None, environ={"LONGFORMER_THREADS": "3"})


@pytest.mark.parametrize("text, value", [("auto", "auto"), ("Auto", "auto"), ("2", 2)])
def test_the_flag_type_reads_a_count_or_auto(text, value):
    assert threads.thread_count(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "two", ""])
def test_the_flag_type_refuses_the_rest(text):
    with pytest.raises(argparse.ArgumentTypeError, match="whole number >= 1 or 'auto'"):
        threads.thread_count(text)


def test_the_description_names_the_source():
    assert threads.choose(None, default=2, environ={"OMP_NUM_THREADS": "1"}).describe() == "1 (OMP_NUM_THREADS)"
    assert threads.choose("auto", environ={}).describe().startswith("auto (--threads auto")
    assert threads.choose(None, environ={"LONGFORMER_THREADS": "auto"}).describe().startswith("auto (LONGFORMER_THREADS")


@pytest.mark.parametrize("value, exported", [("auto", "LONGFORMER_THREADS=auto"), ("3", "OMP_NUM_THREADS=3")])
def test_the_recipes_export_the_policy(value, exported):
    """recipes/threads_env.sh's threads_from, which recipes/quickstart.sh calls with THREADS (auto by default)."""
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", threads.ENV)}
    done = subprocess.run(["bash", "-c", f'source recipes/threads_env.sh && threads_from {value} && env'],
                          cwd=repo, env=env, capture_output=True, text=True, check=True)
    assert exported in done.stdout.splitlines()
    assert 'THREADS="${THREADS:-auto}"' in (repo / "recipes" / "quickstart.sh").read_text()
