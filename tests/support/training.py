"""Helpers for the training tests: run fairseq-train / torchrun in subprocesses with time limits,
and read what fairseq logged (per-update losses, the world size it really used)."""
from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY_MODEL_ARGS

BIN = Path(sys.executable).parent
FAIRSEQ_TRAIN = str(BIN / "fairseq-train")
TORCHRUN = str(BIN / "torchrun")
RECIPES = REPO / "recipes"
REFERENCE_UPDATES = 6  # updates of the runs compared with the one-process reference

# One optimisation setting for every tiny run, so that losses can be compared across launchers.
# --disable-validation keeps runs short; dropout 0 and a fixed seed make them deterministic.
TINY_TRAIN_ARGS = [
    "--batch-size", "4", "--optimizer", "adam", "--lr", "1e-3",
    "--lr-scheduler", "polynomial_decay", "--total-num-update", "20", "--warmup-updates", "2",
    "--dropout", "0", "--seed", "3", "--cpu", "--disable-validation", "--num-workers", "0",
    "--log-format", "simple", "--log-interval", "1",
]


def tiny_train_cmd(data, save_dir, max_update: int, *extra: str) -> list[str]:
    """fairseq-train arguments (no program name) of the tiny Longformer on ``data``."""
    return [str(data), *TINY_MODEL_ARGS, *TINY_TRAIN_ARGS, "--max-update", str(max_update),
            "--save-dir", str(save_dir), *extra]


def subprocess_env() -> dict:
    """The test process's environment, one torch thread per process (2 cores, 2 ranks)."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_logged(cmd, log: Path, timeout: float, cwd=None, env=None) -> str:
    """Runs ``cmd`` with stdout+stderr into ``log``; returns the log, fails the test on error."""
    with open(log, "w") as out:
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, env=env or subprocess_env(), start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise AssertionError(f"timed out after {timeout} s: {' '.join(map(str, cmd))}\n{tail(log)}")
    if code != 0:
        raise AssertionError(f"exit code {code}: {' '.join(map(str, cmd))}\n{tail(log)}")
    return log.read_text()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with start_new_session=True and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


_TRAIN_INNER = re.compile(r"train_inner.*?epoch (\d+):\s+(\d+) / (\d+) (.*)$")


def train_inner(text: str) -> dict[int, dict]:
    """Per-update records of fairseq's ``train_inner`` log lines (``--log-interval 1``), by
    num_updates: loss, lr, gnorm, epoch and the iteration within the epoch (data position)."""
    records = {}
    for line in text.splitlines():
        match = _TRAIN_INNER.search(line)
        if not match:
            continue
        fields = dict(kv.split("=", 1) for kv in match.group(4).split(", ") if "=" in kv)
        update = int(fields["num_updates"])
        records[update] = {
            "epoch": int(match.group(1)), "iteration": int(match.group(2)),
            "iterations_in_epoch": int(match.group(3)), "loss": float(fields["loss"]),
            "lr": float(fields["lr"]), "gnorm": float(fields["gnorm"]),
        }
    return records


def devices_trained_on(text: str) -> int:
    """The world size fairseq really used: its 'training on N devices' line (exactly one)."""
    found = re.findall(r"training on (\d+) devices", text)
    assert len(found) == 1, f"expected one 'training on N devices' line, found {found}"
    return int(found[0])


def assert_same_curve(got: dict[int, dict], want: dict[int, dict], updates, tol: float = 2e-3) -> None:
    """Same loss, gnorm and lr at each update (fairseq logs loss and gnorm rounded to 3 digits)."""
    for update in updates:
        assert update in got, f"update {update} not logged; logged: {sorted(got)}"
        for key in ("loss", "gnorm"):
            assert abs(got[update][key] - want[update][key]) <= tol, (
                f"update {update}: {key} {got[update][key]} != {want[update][key]}")
        assert abs(got[update]["lr"] - want[update]["lr"]) <= 1e-5 * abs(want[update]["lr"]) + 1e-12, (
            f"update {update}: lr {got[update]['lr']} != {want[update]['lr']}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the recipes/ launchers, run with DRY_RUN=1 or for real ---
LAUNCHERS = {
    "single_node": "pretrain_single_node.sh",
    "torchrun": "pretrain_torchrun.sh",
    "slurm": "pretrain_slurm.sbatch",
    "hydra": "pretrain_hydra.sh",
}


def recipe(launcher: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs a launcher with ``env`` on top of a clean environment (no SLURM/cluster variables)."""
    full_env = subprocess_env()
    full_env["PATH"] = f"{BIN}{os.pathsep}{full_env.get('PATH', '')}"
    for name in ("NNODES", "GPUS_PER_NODE", "SLURM_JOB_NUM_NODES", "SLURM_GPUS_ON_NODE",
                 "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_SUBMIT_DIR", "MASTER_ADDR", "MASTER_PORT"):
        full_env.pop(name, None)
    full_env.update({k: str(v) for k, v in env.items()})
    return subprocess.run(["bash", str(RECIPES / LAUNCHERS[launcher])], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def fake_gpus(tmp_path, compute_capabilities=None) -> dict:
    """PATH with an ``nvidia-smi`` that lists GPUs of these compute capabilities (None: one that
    fails, as on a machine without a driver), ahead of the real one."""
    folder = tmp_path / "fake_nvidia_smi"
    folder.mkdir(exist_ok=True)
    body = ("exit 9" if compute_capabilities is None
            else "printf '%s\\n' " + " ".join(compute_capabilities))
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def dry_run(launcher: str, env: dict) -> list:
    """The command a launcher prints with DRY_RUN=1, as an argv list."""
    proc = recipe(launcher, {"DRY_RUN": "1", **env})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"DRY_RUN must print exactly the command:\n{proc.stdout}"
    return shlex.split(lines[0])


def split_command(argv: list):
    """(launcher part, fairseq-train argv without the program, flags of fairseq-train)."""
    at = next(i for i, a in enumerate(argv) if a.endswith("fairseq-train"))
    train_args = argv[at + 1:]
    flags = {}
    for i, arg in enumerate(train_args):
        if arg.startswith("--"):
            nxt = train_args[i + 1] if i + 1 < len(train_args) else None
            flags[arg] = nxt if nxt is not None and not nxt.startswith("--") else True
    return argv[:at], train_args, flags


def launcher_flag(launcher_argv: list, name: str) -> str:
    return launcher_argv[launcher_argv.index(name) + 1]


# ---- fixtures (registered for the whole suite by the root conftest.py)
@pytest.fixture(scope="session")
def reference_training_run(kjv_data_bin, tmp_path_factory):
    """ONE process doing what two ranks do together: batch 4 x update-freq 2 (two ranks: batch 4
    each). fairseq gives rank r the batches r, r + 2, ... of the epoch, the same batches one
    process accumulates per update, so the losses must agree. Returns the per-update records and
    the final checkpoint (a small trained model, used as the "RoBERTa" of the recipe tests)."""
    work = tmp_path_factory.mktemp("reference")
    cmd = [FAIRSEQ_TRAIN, *tiny_train_cmd(kjv_data_bin, work / "save", REFERENCE_UPDATES,
                                          "--update-freq", "2", "--no-epoch-checkpoints")]
    text = run_logged(cmd, work / "train.log", timeout=240)
    records = train_inner(text)
    assert sorted(records) == list(range(1, REFERENCE_UPDATES + 1)), sorted(records)
    checkpoint = work / "save" / "checkpoint_last.pt"
    assert checkpoint.is_file()
    return records, checkpoint


@pytest.fixture(scope="session")
def reference_curve(reference_training_run):
    return reference_training_run[0]


@pytest.fixture(scope="session")
def tiny_checkpoint(reference_training_run):
    return reference_training_run[1]
