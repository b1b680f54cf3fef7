"""The README's main job (recipes/quickstart.sh), shortened: BPC falls, a run killed with
SIGKILL resumes from its last checkpoint at the same update when the same command is re-run, and
the job ends with its summary, plot and fill-mask demo."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import REPO  # noqa: E402


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
    updates_total = 30  # long enough that the kill below lands mid-run (the job does ~5 updates/s)
    first = quickstart(tmp_path, updates_total)
    checkpoint = tmp_path / "checkpoints" / "quickstart" / "checkpoint_1_6.pt"
    deadline = time.time() + 600
    while not checkpoint.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert checkpoint.exists(), first.communicate()[0][-3000:]
    time.sleep(0.3)  # let it get into updates 7-8, whose work must be redone after the kill
    os.killpg(first.pid, signal.SIGKILL)
    killed_log = first.communicate()[0]
    done_before_kill = [int(r["num_updates"]) for r in json_records(killed_log, "train_inner")]
    assert 6 <= max(done_before_kill) < updates_total, "the kill must land mid-run"
    saved = [int(n) for n in re.findall(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates", killed_log)]

    second = quickstart(tmp_path, updates_total)
    log = second.communicate(timeout=900)[0]
    assert second.returncode == 0, log[-3000:]
    # resumed from the last complete checkpoint: the last one logged as saved, or the next one
    # (every 3 updates) if the kill came after its copy to checkpoint_last.pt but before the log line
    match = re.search(r"Loaded checkpoint \S+ \(epoch \d+ @ (\d+) updates\)", log)
    assert match, log[-3000:]
    resumed_at = int(match.group(1))
    assert resumed_at in (max(saved), max(saved) + 3) and resumed_at < updates_total, (saved, resumed_at)
    updates = [int(r["num_updates"]) for r in json_records(log, "train_inner")]
    assert updates[0] == resumed_at + 1 and updates[-1] == updates_total
    valid = json_records(killed_log, "valid") + json_records(log, "valid")
    bpc = [float(v["valid_bpc"]) for v in valid]
    assert len(bpc) >= 3 and bpc[-1] < bpc[0] - 0.5, bpc
    assert "checkpoint_last.pt" in log
    # the end of the job: summary against the unigram baseline, the plot, the fill-mask demo
    assert "unigram baselines (bits per token)" in log and f"-> {bpc[-1]:.3f} at update {updates_total}" in log, log[-3000:]
    png = tmp_path / "checkpoints" / "quickstart" / "bpc.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    answers = [line for line in log.splitlines() if line.strip().startswith("answer:")]
    assert len(answers) == 4 and all("model:" in line for line in answers), log[-3000:]
