"""Safe resume: a run killed with SIGKILL mid-epoch, started again with the very same command,
continues from its last complete checkpoint with the same update number, lr and data position,
and its loss curve from there is the uninterrupted run's. No checkpoint file is left
half-written under its final name."""
import re
import subprocess
import time

import torch

from tests.support.training import (
    FAIRSEQ_TRAIN, assert_same_curve, kill_group, run_logged, subprocess_env, tail,
    tiny_train_cmd, train_inner,
)

MAX_UPDATE = 16
SAVE_EVERY = 4
KILL_AFTER_SAVE_AT = 8  # kill right after the checkpoint of this update has been saved
_SAVED = re.compile(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates")


def _command(data, save_dir):
    return [FAIRSEQ_TRAIN, *tiny_train_cmd(
        data, save_dir, MAX_UPDATE, "--total-num-update", str(MAX_UPDATE),
        "--save-interval-updates", str(SAVE_EVERY), "--no-epoch-checkpoints")]


def _run_and_kill(cmd, log, timeout=240.0) -> int:
    """Starts ``cmd``, SIGKILLs it as soon as the log says the checkpoint at KILL_AFTER_SAVE_AT
    updates was saved; returns the last update whose save the log reported before the kill."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=subprocess_env(),
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while True:
            saved = [int(u) for u in _SAVED.findall(log.read_text(errors="replace"))]
            if saved and max(saved) >= KILL_AFTER_SAVE_AT:
                break
            assert proc.poll() is None, f"the run ended before it could be killed:\n{tail(log)}"
            assert time.monotonic() < deadline, f"no checkpoint at {KILL_AFTER_SAVE_AT} updates:\n{tail(log)}"
            time.sleep(0.02)
    finally:
        kill_group(proc)
    assert proc.returncode == -9, f"expected death by SIGKILL, got exit code {proc.returncode}"
    return max(int(u) for u in _SAVED.findall(log.read_text(errors="replace")))


def test_sigkill_then_same_command_resumes_on_the_uninterrupted_curve(kjv_data_bin, tmp_path):
    full = train_inner(run_logged(_command(kjv_data_bin, tmp_path / "full"), tmp_path / "full.log", 240))
    assert sorted(full) == list(range(1, MAX_UPDATE + 1))

    save_dir = tmp_path / "killed"
    cmd = _command(kjv_data_bin, save_dir)
    last_saved = _run_and_kill(cmd, tmp_path / "killed.log")
    killed = train_inner((tmp_path / "killed.log").read_text())
    assert max(killed) < MAX_UPDATE, "the run finished before the kill: nothing was tested"

    # nothing under a final name is half-written, whenever the kill landed
    for path in sorted(save_dir.glob("checkpoint*.pt")):
        state = torch.load(path, map_location="cpu", weights_only=False)
        assert "model" in state, path

    text = run_logged(cmd, tmp_path / "resumed.log", 240)  # the very same command
    loaded = re.findall(r"Loaded checkpoint (\S+) \(epoch (\d+) @ (\d+) updates\)", text)
    assert len(loaded) == 1 and loaded[0][0].endswith("checkpoint_last.pt"), loaded
    start = int(loaded[0][2])
    # the last save the log reported, or the next one if the kill came after its copy finished
    assert start in (last_saved, last_saved + SAVE_EVERY), (start, last_saved)
    resumed = train_inner(text)
    assert min(resumed) == start + 1, f"resumed at update {min(resumed)}, checkpoint at {start}"
    assert max(resumed) == MAX_UPDATE
    for update in resumed:  # same place in the data: same epoch and iteration within it
        assert (resumed[update]["epoch"], resumed[update]["iteration"]) == (
            full[update]["epoch"], full[update]["iteration"]), update
    assert_same_curve(resumed, full, range(start + 1, MAX_UPDATE + 1))
