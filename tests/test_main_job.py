"""The README's main job (recipes/quickstart.sh), shortened: BPC falls, a run killed with
SIGKILL resumes from its last checkpoint at the same update when the same command is re-run, and
the job ends with its summary, plot and fill-mask demo."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def quickstart(work: Path, max_update: int, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, WORK=str(work), MAX_UPDATE=str(max_update), SAVE_INTERVAL_UPDATES="3")
    return subprocess.Popen(
        ["bash", str(REPO / "recipes" / "quickstart.sh"), "--log-format", "json", "--log-interval", "1",
         "--validate-interval-updates", "3", "--warmup-updates", "3", *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group, so SIGKILL reaches fairseq-train too
    )


def json_records(log: str, kind: str):
    """fairseq's --log-format json lines of one kind ('train_inner', 'valid')."""
    records = []
    for line in log.splitlines():
        if f"| {kind} |" in line and "{" in line:
            records.append(json.loads(line[line.index("{"):]))
    return records


def test_main_job_learns_and_resumes_after_sigkill(tmp_path):
    first = quickstart(tmp_path, 12)
    checkpoint = tmp_path / "checkpoints" / "quickstart" / "checkpoint_1_6.pt"
    deadline = time.time() + 600
    while not checkpoint.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert checkpoint.exists(), first.communicate()[0][-3000:]
    time.sleep(1.0)  # let it get into updates 7-8, whose work must be redone after the kill
    os.killpg(first.pid, signal.SIGKILL)
    killed_log = first.communicate()[0]
    done_before_kill = [int(r["num_updates"]) for r in json_records(killed_log, "train_inner")]
    assert max(done_before_kill) >= 6

    second = quickstart(tmp_path, 12)
    log = second.communicate(timeout=900)[0]
    assert second.returncode == 0, log[-3000:]
    # resumed from the last complete checkpoint: update 6, or 9 if it was written before the kill
    resumed_at = 6 if "(epoch 1 @ 6 updates)" in log else 9
    assert "Loaded checkpoint" in log and f"(epoch 1 @ {resumed_at} updates)" in log, log[-3000:]
    updates = [int(r["num_updates"]) for r in json_records(log, "train_inner")]
    assert updates[0] == resumed_at + 1 and updates[-1] == 12
    valid = json_records(killed_log, "valid") + json_records(log, "valid")
    bpc = [float(v["valid_bpc"]) for v in valid]
    assert len(bpc) >= 3 and bpc[-1] < bpc[0] - 0.5, bpc
    assert "checkpoint_last.pt" in log
    # the end of the job: summary against the unigram baseline, the plot, the fill-mask demo
    assert "unigram baselines (bits per token)" in log and f"-> {bpc[-1]:.3f} at update 12" in log, log[-3000:]
    png = tmp_path / "checkpoints" / "quickstart" / "bpc.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    answers = [line for line in log.splitlines() if line.strip().startswith("answer:")]
    assert len(answers) == 4 and all("model:" in line for line in answers), log[-3000:]
