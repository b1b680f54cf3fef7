"""The one thread policy of this project's commands: a fixed count, or ``auto`` (the cores other
processes leave free, ``free_cores``), with the user's explicit count always winning.

Precedence, first match wins:
  1. ``--threads N`` on a command line                 N threads
  2. ``OMP_NUM_THREADS`` in the environment             its count (torch's own reading of it)
  3. ``--threads auto`` or ``LONGFORMER_THREADS=auto``  the free cores, at most torch's own count
  4. the command's default (or torch's own count)

``auto`` never goes above the count torch would use by itself (its physical cores), so a quiet
machine runs exactly as without it; with a core taken by another process it runs one thread
fewer, instead of every parallel region waiting for a thread that shares a core. The standard
library only: the caller applies the count (``torch.set_num_threads``).
"""
import argparse
import os
from dataclasses import dataclass
from typing import Mapping, Optional, Union

from . import free_cores
from .errors import UserInputError

ENV = "LONGFORMER_THREADS"
AUTO = "auto"
# seconds a benchmark watches the machine before fixing a whole condition's count: a shorter look
# could let a passing blip of other work decide the run
BENCH_INTERVAL = 1.0


@dataclass(frozen=True)
class ThreadPolicy:
    auto: bool
    count: Optional[int]  # the fixed count; None: auto, or torch's own count
    source: str  # where it came from: "--threads", "OMP_NUM_THREADS", "LONGFORMER_THREADS", "default"

    def threads(self, most: int, interval: float = 0.2) -> int:
        """The count to use now: the fixed one, or (auto) the cores free over the next
        ``interval`` seconds, at most ``most`` (torch's own count); ``most`` when none is fixed."""
        return free_threads(most, interval) if self.auto else self.count or most

    def describe(self) -> str:
        """For pages and logs, e.g. "auto (--threads auto)" or "2 (OMP_NUM_THREADS)"."""
        if self.auto:
            return f"auto ({'--threads auto' if self.source == '--threads' else self.source}: the cores free " \
                   "of other processes' work when a run starts, at most torch's own count)"
        return f"{self.count if self.count else 'torch default'} ({self.source})"


def free_threads(most: int, interval: float = 0.2) -> int:
    """The auto count: the cores free of other processes' work over the next ``interval``
    seconds, between 1 and ``most``."""
    return max(1, min(most, free_cores.free_cores(interval)))


def thread_count(text: str) -> Union[int, str]:
    """The argparse type of ``--threads``: "auto" or a whole number >= 1."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 or 'auto', got {text!r}")
    return count


def _omp_count(value: str) -> Optional[int]:
    """OMP_NUM_THREADS's outer count ("4" or "4,2"), None when unreadable (torch then decides)."""
    try:
        count = int(value.split(",")[0])
    except ValueError:
        return None
    return count if count >= 1 else None


def choose(requested: Union[int, str, None] = None, default: Optional[int] = None,
           environ: Optional[Mapping[str, str]] = None) -> ThreadPolicy:
    """The policy of a run: ``requested`` is the command line's ``--threads`` (N, "auto" or None
    when not given), ``default`` the command's own count (None: torch's). A UserInputError when
    LONGFORMER_THREADS holds anything but "auto"."""
    environ = os.environ if environ is None else environ
    wanted = environ.get(ENV, "").strip().lower()
    if wanted not in ("", AUTO):
        raise UserInputError(f"{ENV}={environ[ENV]!r}: it takes only 'auto'; for a fixed count set "
                             "OMP_NUM_THREADS=N (or the command's --threads N)")
    if isinstance(requested, int):
        return ThreadPolicy(False, requested, "--threads")
    if "OMP_NUM_THREADS" in environ:
        return ThreadPolicy(False, _omp_count(environ["OMP_NUM_THREADS"]), "OMP_NUM_THREADS")
    if requested == AUTO:
        return ThreadPolicy(True, None, "--threads")
    if wanted == AUTO:
        return ThreadPolicy(True, None, ENV)
    return ThreadPolicy(False, default, "default")
