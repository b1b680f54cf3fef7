"""Restart safety: a run killed mid-way leaves no file under a final name, and the same command
run again gives the bytes of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from preprocessing_helpers import output_bytes

FINAL_NAMES = {"train.bin", "train.idx", "valid.bin", "valid.idx", "test.bin", "test.idx",
               "dict.txt", "stats.json", "stats.md", "spm.model", "preprocess.done.json"}

# Runs the pipeline in a child process that SIGKILLs itself (no cleanup of any kind can run)
# when the pipeline stores its N-th tokenized document.
KILL_SCRIPT = """
import os, signal, sys
from longformer_preprocessing import binarize
from longformer_preprocessing import preprocess

n_before_kill = int(sys.argv[1])
original_add = binarize.DocStore.add
seen = [0]

def add(self, *args, **kwargs):
    seen[0] += 1
    if seen[0] == n_before_kill:
        os.kill(os.getpid(), signal.SIGKILL)
    return original_add(self, *args, **kwargs)

binarize.DocStore.add = add
preprocess(sys.argv[2:])
"""


@pytest.fixture(scope="module")
def args_and_reference(kjv_slice, spm_model, tmp_path_factory):
    from longformer_preprocessing import preprocess

    args = ["--books", kjv_slice, "--sentencepiece-model", spm_model, "--valid-docs", "2", "--test-docs", "2",
            "--max-line-tokens", "126", "--no-progress"]
    ref = str(tmp_path_factory.mktemp("ref") / "out")
    stats = preprocess(args + ["--destdir", ref])
    assert stats["total"]["documents"] == 16
    return args, output_bytes(ref)


def test_killed_mid_stream_then_restarted(args_and_reference, tmp_path, run_preprocess):
    args, reference = args_and_reference
    dest = str(tmp_path / "out")
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, "9"] + args + ["--destdir", dest, "--workers", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = set(os.listdir(dest))
    assert not left & FINAL_NAMES, f"partial outputs under final names: {left & FINAL_NAMES}"
    tmp_dirs = [n for n in left if n.startswith(".tmp-longformer-preprocess-")]
    assert len(tmp_dirs) == 1 and os.listdir(os.path.join(dest, tmp_dirs[0]))  # the unfinished work

    run_preprocess(args + ["--destdir", dest])  # the same command again
    assert output_bytes(dest) == reference
    assert not [n for n in os.listdir(dest) if n.startswith(".tmp-")]
    assert "preprocess.done.json" in os.listdir(dest)


def test_interrupted_while_moving_outputs_into_place(args_and_reference, tmp_path, run_preprocess, monkeypatch):
    """Interrupted between the atomic renames: the finished files are whole, the run is not
    marked done, and the next run redoes it."""
    args, reference = args_and_reference
    dest = str(tmp_path / "out")
    real_replace = os.replace
    calls = [0]

    def replace(src, dst):
        real_replace(src, dst)
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt("simulated kill")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        run_preprocess(args + ["--destdir", dest])
    monkeypatch.setattr(os, "replace", real_replace)
    present = set(os.listdir(dest)) & FINAL_NAMES
    assert len(present) == 3 and "preprocess.done.json" not in present
    for name in present:  # whole files (os.replace is atomic), never half-written ones
        with open(os.path.join(dest, name), "rb") as f:
            assert f.read() == reference[name]

    run_preprocess(args + ["--destdir", dest])
    assert output_bytes(dest) == reference
    assert "preprocess.done.json" in os.listdir(dest)


def test_restart_after_a_different_finished_run(args_and_reference, tmp_path, run_preprocess, capsys):
    """A destdir holding a finished run with other arguments is not mistaken for done."""
    args, reference = args_and_reference
    dest = str(tmp_path / "out")
    run_preprocess(args + ["--destdir", dest, "--seed", "5"])
    assert output_bytes(dest) != reference
    capsys.readouterr()
    run_preprocess(args + ["--destdir", dest])
    assert "skipping" not in capsys.readouterr().err
    assert output_bytes(dest) == reference
