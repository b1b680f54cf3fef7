"""The standard competing load of the benchmarks' busy mode (``--busy N``): N pure-Python spin
loops, each its own process, pinned to nothing, started and stopped by the benchmark.

A spinner can outlive nothing: the benchmark stops it in a ``finally`` (any exception, Ctrl-C),
and the spinner itself exits when its time bound passes or when its parent is gone (the parent
killed outright, where no ``finally`` runs): it checks both about ten times a second.
"""
import contextlib
import os
import subprocess
import sys
from typing import Iterator, List

# the spinner's whole program: busy arithmetic, a look at the clock and the parent every 2**16 turns
SPIN = """
import os, sys, time
parent, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
turns = 0
while True:
    turns += 1
    if turns & 0xFFFF == 0 and (time.monotonic() > deadline or os.getppid() != parent):
        break
"""


def start(processes: int, max_seconds: float) -> List[subprocess.Popen]:
    """Start ``processes`` spinners that stop by themselves after ``max_seconds``."""
    return [subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid()), str(max_seconds)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(processes)]


def stop(spinners: List[subprocess.Popen]) -> None:
    """Kill every spinner of ``spinners`` that still runs and reap it."""
    for spinner in spinners:
        if spinner.poll() is None:
            spinner.kill()
    for spinner in spinners:
        spinner.wait()


@contextlib.contextmanager
def competing_load(processes: int, max_seconds: float) -> Iterator[List[subprocess.Popen]]:
    """``processes`` spinners for the body of the ``with`` (none for 0), killed on leaving it,
    however it is left; ``max_seconds`` bounds them should the benchmark die unannounced."""
    spinners = start(processes, max_seconds)
    try:
        yield spinners
    finally:
        stop(spinners)
