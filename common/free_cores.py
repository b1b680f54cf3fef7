"""How many of the cores this process may run on are free of other processes' work (Linux /proc).

A process with as many OpenMP threads as cores loses badly when another process keeps one core
busy: every parallel region waits for the thread that shares a core (docs/cpu.md). Counting the
cores the rest of the machine leaves free lets the thread policy (``threads``) pick that many.

A sample holds, for each CPU this process may use (``os.sched_getaffinity``), its busy and total
clock ticks from /proc/stat, and this process's own ticks (all its threads, from /proc/self/stat).
Between two samples, the other processes' work is the allowed CPUs' busy ticks minus our own, in
cores: (busy - own) / (ticks one CPU counted). A core counts as taken when that work fills at
least half of one. Where /proc cannot be read, every allowed core counts as free.
"""
import os
import time
from dataclasses import dataclass
from typing import Dict, Optional, Set, Tuple

PROC = "/proc"


@dataclass(frozen=True)
class CpuSample:
    cpus: Dict[int, Tuple[int, int]]  # cpu id -> (busy ticks, total ticks) since boot
    own: int  # this process's user + system ticks since it started


def allowed_cores() -> Set[int]:
    """The CPU ids this process may run on (all CPUs where affinity is not available)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def read_cpus(proc: str = PROC) -> Dict[int, Tuple[int, int]]:
    """Per-CPU (busy, total) ticks from ``proc``/stat: busy = total - idle - iowait, total = the
    first eight fields (user .. steal; guest time is already inside user)."""
    cpus = {}
    with open(os.path.join(proc, "stat")) as stat:
        for line in stat:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            ticks = [int(v) for v in fields[:8]]
            total = sum(ticks)
            cpus[int(name[3:])] = (total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0), total)
    return cpus


def read_own_ticks(proc: str = PROC) -> int:
    """utime + stime of this process (every thread) from ``proc``/self/stat, in clock ticks."""
    with open(os.path.join(proc, "self", "stat")) as stat:
        text = stat.read()
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces: cut after it
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5), counted from the state (3)


def sample(proc: str = PROC) -> Optional[CpuSample]:
    """A sample now, or None where /proc is missing or unreadable."""
    try:
        return CpuSample(read_cpus(proc), read_own_ticks(proc))
    except (OSError, ValueError, IndexError):
        return None


def free_between(first: Optional[CpuSample], second: Optional[CpuSample], allowed: Set[int]) -> int:
    """How many of ``allowed`` were free of other processes' work between two samples: at least
    1; all of them when either sample is missing, covers none of ``allowed`` or no time passed."""
    if first is None or second is None:
        return max(1, len(allowed))
    ids = [cpu for cpu in allowed if cpu in first.cpus and cpu in second.cpus]
    if not ids:
        return max(1, len(allowed))
    busy = sum(second.cpus[c][0] - first.cpus[c][0] for c in ids)
    per_cpu = sum(second.cpus[c][1] - first.cpus[c][1] for c in ids) / len(ids)
    if per_cpu <= 0:
        return max(1, len(allowed))
    others = max(0, busy - (second.own - first.own)) / per_cpu
    taken = int(others + 0.5)  # a core counts as taken when others fill at least half of it
    return max(1, len(ids) - taken)


def free_cores(interval: float = 0.2, proc: str = PROC) -> int:
    """The free cores of this process's allowed ones over the next ``interval`` seconds (this
    process sleeps meanwhile; its own threads' work is not counted against the cores)."""
    first = sample(proc)
    if first is None:
        return max(1, len(allowed_cores()))
    time.sleep(interval)
    return free_between(first, sample(proc), allowed_cores())
