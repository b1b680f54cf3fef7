"""Where and when a stored result was measured: the commit, the machine (CPU model), the date and
the load average. Every command that writes a page under ``docs/results/`` stores this beside its
numbers (``provenance()``) and every page states it (``provenance_line``), so that a figure can
always be traced to the code and the machine that produced it.

A file stored before this existed gets the same keys by hand, with ``recorded_afterwards`` saying
how they were found (the commit that stored the file, from git's history) and ``cpu`` None where
nobody recorded it.
"""
import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def cpu_model() -> Optional[str]:
    """The CPU's model name (/proc/cpuinfo on Linux; platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def provenance() -> dict:
    """{"commit", "dirty", "cpu", "cpus", "date", "load_average"} of this checkout and machine, now.
    ``dirty``: tracked files differ from the commit (the numbers are then of uncommitted code);
    ``commit`` outside a git checkout (an installed copy, a copy carried to a GPU machine): the
    environment's COMMIT where the caller names it, else None."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": _git("rev-parse", "--short=12", "HEAD") or os.environ.get("COMMIT") or None, "dirty": bool(status) if status is not None else None,
            "cpu": cpu_model(), "cpus": os.cpu_count(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}


def provenance_line(record: Optional[dict]) -> str:
    """One sentence for a page: "Measured on commit abc (with uncommitted changes), CPU, N cores,
    date, load average x / y / z." ``record`` None: says that nothing was recorded."""
    if not record:
        return "Measured on: not recorded (the commit, machine and date of this run are unknown)."
    commit = record.get("commit") or "an unknown commit"
    parts = [f"commit {commit}" + (" with uncommitted changes" if record.get("dirty") else "")]
    cpu = record.get("cpu")
    parts.append(cpu if cpu else "CPU model not recorded")
    if record.get("cpus"):
        parts.append(f"{record['cpus']} cores")
    if record.get("date"):
        parts.append(record["date"])
    load = record.get("load_average")
    if load:
        parts.append("load average " + " / ".join(f"{x:.1f}" for x in load))
    text = "Measured on " + ", ".join(parts) + "."
    if record.get("recorded_afterwards"):
        text += f" ({record['recorded_afterwards']})"
    return text
