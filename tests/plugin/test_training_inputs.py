"""fairseq_longformer.runtime.save_dir and input_checks: one training per --save-dir, held by the folder's flock for
the run's life, taken only once the inputs are accepted; another process (here a bare Python that
loads atomic.py alone: no fairseq import) is refused while it is held and gets it at once after a
release or after the holder was killed (the kernel frees a dead process's flock: no stale lock).
The refusals of whole fairseq-train runs are rows of tests/integration/test_bad_inputs.py."""
import os
import signal
import subprocess
import sys

import pytest
import torch

import fairseq_longformer  # noqa: F401  (applies the patches)
from fairseq_longformer.runtime import input_checks, save_dir
from fairseq_longformer.runtime.errors import UserInputError
from tests.conftest import REPO

# exit 0 when the folder's lock could be taken, 3 when another process holds it; with "hold",
# takes it, prints "held" and sleeps until killed
_OTHER_PROCESS = r"""
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec); spec.loader.exec_module(atomic)
try:
    fd = atomic.hold_folder(sys.argv[2])
except BlockingIOError:
    sys.exit(3)
if sys.argv[3:] == ["hold"]:
    print("held", flush=True)
    time.sleep(600)
"""


def other_process(folder, *mode):
    return subprocess.Popen([sys.executable, "-c", _OTHER_PROCESS, str(REPO / "common" / "atomic.py"),
                             str(folder), *mode], stdout=subprocess.PIPE, text=True)


def can_take(folder) -> bool:
    code = other_process(folder).wait(timeout=60)
    assert code in (0, 3)
    return code == 0


def test_a_save_dir_is_made_only_once_accepted_and_held_for_the_run(tmp_path):
    save = tmp_path / "parent" / "run"
    save_dir.claim_save_dir(str(save))  # the start of fairseq-train: nothing written yet
    assert not save.exists() and not (tmp_path / "parent").exists()
    try:
        save_dir.create_save_dir(str(save))  # the inputs are accepted
        assert save.is_dir() and list(save.iterdir()) == []  # the lock is no file in it
        assert not can_take(save)
    finally:
        save_dir.release_save_dir()
    assert not save.exists()  # made by the run and left empty: removed at its end
    save.mkdir(parents=True)
    assert can_take(save)


def test_a_second_run_is_refused_and_a_killed_run_leaves_no_lock(tmp_path):
    holder = other_process(tmp_path, "hold")
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserInputError) as refused:
            save_dir.claim_save_dir(str(tmp_path))
        assert str(tmp_path) in str(refused.value) and "another --save-dir" in str(refused.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    save_dir.claim_save_dir(str(tmp_path))  # the dead run's lock is gone with it
    save_dir.release_save_dir()
    assert tmp_path.is_dir()  # a folder the run did not make is never removed


def test_a_run_that_saved_keeps_its_folder(tmp_path):
    save = tmp_path / "run"
    save_dir.create_save_dir(str(save))
    (save / "checkpoint_last.pt").write_bytes(b"a checkpoint")
    save_dir.release_save_dir()
    assert (save / "checkpoint_last.pt").exists() and can_take(save)


def test_a_grown_dictionary_keeps_every_pretrained_row_and_the_mask_row(kjv_data_bin, tmp_path):
    """--restore-file onto data whose dict.txt appends a symbol, with --allow-dictionary-change:
    every pretrained symbol keeps its row, the new symbol starts fresh, and <mask> (which the task
    appends after the grown dictionary, one row further down) keeps the pretrained <mask> row,
    compared with the pretrained checkpoint itself after one update at a learning rate of 1e-30."""
    from tests.conftest import TINY_MODEL_ARGS
    from tests.support.in_process import run_fairseq_in_process

    common = [*TINY_MODEL_ARGS, "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
              "--tokens-per-sample", "32", "--max-positions", "32", "--attention-window", "8", "--pad-to-multiple", "8",
              "--dropout", "0", "--attention-dropout", "0",
              "--batch-size", "2", "--optimizer", "adam", "--cpu", "--max-update", "1",
              "--disable-validation", "--num-workers", "0", "--no-epoch-checkpoints", "--seed", "3"]
    pretrained = tmp_path / "pretrained"
    code, err = run_fairseq_in_process("fairseq-train", [str(kjv_data_bin), *common, "--lr", "1e-3",
                                                         "--save-dir", str(pretrained)])
    assert code == 0, err[-2000:]
    (pretrained / "dict.txt").write_bytes((kjv_data_bin / "dict.txt").read_bytes())
    grown = tmp_path / "grown"
    grown.mkdir()
    for item in kjv_data_bin.iterdir():
        if item.suffix in (".bin", ".idx"):
            (grown / item.name).symlink_to(item)
    (grown / "dict.txt").write_text((kjv_data_bin / "dict.txt").read_text() + "newword 1\n")

    restore = [str(grown), *common, "--lr", "1e-30", "--restore-file", str(pretrained / "checkpoint_last.pt"),
               "--reset-optimizer", "--save-dir", str(tmp_path / "run")]
    code, err = run_fairseq_in_process("fairseq-train", restore)
    assert code == 1 and "--allow-dictionary-change" in err.strip().splitlines()[-1]
    code, err = run_fairseq_in_process("fairseq-train", [*restore, "--allow-dictionary-change"])
    assert code == 0, err[-2000:]

    key = "encoder.sentence_encoder.embed_tokens.weight"
    before = torch.load(pretrained / "checkpoint_last.pt", map_location="cpu", weights_only=False)["model"][key]
    after = torch.load(tmp_path / "run" / "checkpoint_last.pt", map_location="cpu", weights_only=False)["model"][key]
    symbols = len(input_checks.read_symbols(kjv_data_bin / "dict.txt"))
    old_mask = 4 + symbols  # fairseq's 4 specials, the symbols, then the task's <mask>
    assert before.shape[0] == old_mask + 1 and after.shape[0] == old_mask + 2
    torch.testing.assert_close(after[:old_mask], before[:old_mask], atol=1e-6, rtol=0)
    torch.testing.assert_close(after[old_mask + 1], before[old_mask], atol=1e-6, rtol=0)  # <mask> -> <mask>
    assert (after[old_mask] - before[old_mask]).abs().max() > 1e-3  # the new symbol: not the pretrained <mask>


def test_torchrun_without_the_world_size_is_named(monkeypatch, tmp_path):
    """torchrun's WORLD_SIZE=2 with fairseq training alone (no process group) is refused naming
    the flag; one process (WORLD_SIZE=1), no torchrun, or a joined process group are not."""
    claim_save_dir = save_dir.claim_save_dir
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "1"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    with pytest.raises(UserInputError, match=r"WORLD_SIZE=2.*--distributed-world-size 2"):
        claim_save_dir(str(tmp_path / "run"))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # fairseq joined torchrun's group
    claim_save_dir(str(tmp_path / "run"))
    monkeypatch.undo()
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    claim_save_dir(str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
