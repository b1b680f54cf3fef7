"""Busy mode (``bench/busy_mode.py``, ``bench/competing_load.py``): slowdowns and speedups from
known times, and spin processes that never outlive their benchmark."""
import os
import subprocess
import sys
import time

import pytest

from longformer_tools.bench import busy_mode, competing_load, train_steps


def _row(impl, calls, status="ok"):
    ordered = sorted(calls)
    return {"impl": impl, "length": 4096, "global_tokens": 0, "dropout": 0.0, "status": status,
            "fwd_bwd_ms_all": list(calls), "fwd_bwd_ms": ordered[len(ordered) // 2]}


def test_slowdown_and_speedup_over_dense_in_both_conditions():
    quiet = [_row("dense", [300, 310, 290]), _row("torch", [100, 110, 90])]
    busy = [_row("dense", [600, 620, 580]), _row("torch", [600, 660, 540])]
    entries = {e["impl"]: e for e in busy_mode.summary(quiet, busy)}
    torch_entry = entries["torch"]
    assert torch_entry["slowdown"] == {"median": 6.0, "min": 540 / 110, "max": 660 / 90}
    assert torch_entry["speedup_vs_dense_quiet"] == {"median": 3.0, "min": 310 / 110, "max": 290 / 90}
    assert torch_entry["speedup_vs_dense_busy"]["median"] == pytest.approx(1.0)
    assert entries["dense"]["slowdown"]["median"] == 2.0
    assert entries["dense"]["speedup_vs_dense_busy"] == {"median": 1.0, "min": 1.0, "max": 1.0}
    lines = busy_mode.table_lines(busy_mode.summary(quiet, busy))
    assert "| 4,096 | 0 | torch | 0 | 100.0 (90.0-110.0) | 600.0 (540.0-660.0) | 6.00 (4.91-7.33) | 3.00" in lines[3]


def test_a_contender_that_failed_in_either_condition_has_no_entry():
    quiet = [_row("dense", [300]), _row("torch", [100])]
    assert [e["impl"] for e in busy_mode.summary(quiet, [_row("dense", [600]), _row("torch", [1], "too_slow")])] == ["dense"]


def test_spinners_burn_a_core_and_are_killed_however_the_body_ends():
    with pytest.raises(RuntimeError):
        with competing_load.competing_load(2, max_seconds=60) as spinners:
            time.sleep(0.5)
            assert all(s.poll() is None for s in spinners)  # running
            raise RuntimeError("the benchmark failed")
    assert all(s.returncode is not None for s in spinners)


def test_a_spinner_stops_by_itself_at_its_bound_and_when_its_parent_dies():
    [spinner] = competing_load.start(1, max_seconds=0.5)
    assert spinner.wait(timeout=30) == 0
    # a parent killed outright (no finally runs): its spinner notices and exits
    parent = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; from longformer_tools.bench import competing_load as c; "
                               "print(c.start(1, 600)[0].pid, flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}"):
        with open(f"/proc/{child}/stat") as stat:  # reaped by init once it exits
            if stat.read().split(")")[1].split()[0] == "Z":
                break
        time.sleep(0.2)
    alive = os.path.exists(f"/proc/{child}") and open(f"/proc/{child}/stat").read().split(")")[1].split()[0] != "Z"
    assert not alive


def test_train_steps_busy_summary_from_known_steps():
    quiet = [{"name": "longformer_mlm", "checkpointing": False, "length": 1024, "batch": 2, "status": "ok",
              "tokens_per_s": 20000.0, "step_ms_min": 95.0, "step_ms_max": 110.0, "repeats": 5}]
    busy = [dict(quiet[0], tokens_per_s=2000.0, step_ms_min=900.0, step_ms_max=1100.0)]
    [entry] = train_steps.busy_summary(quiet, busy)
    assert entry["slowdown"] == 10.0 and entry["slowdown_min"] == 900 / 110 and entry["slowdown_max"] == 1100 / 95
    assert "longformer_mlm" in train_steps.format_busy([entry])[1]
