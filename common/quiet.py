"""A measuring command waits for the machine to be quiet before it writes into ``docs/results/``.

The rule (stdlib only, shared by every command that writes a results page): before measuring,
wait up to ``max_wait_s`` seconds for the 1-minute load average to fall to ``QUIET_LOAD`` (1.0:
one busy core of the 2-core machine the pages were measured on) or below. If it is still above
after the wait, the command refuses to write into docs/results/ (``refusal``: one line, exit 2)
unless ``--allow-load`` was given; then its page opens with ``load_banner``. The load at the start
and at the end is stored in the JSON and printed on the page either way.
"""
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Union

QUIET_LOAD = 1.0
POLL_S = 10.0
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"

Load = Union[float, Sequence[float], None]


def one_minute_load() -> Optional[float]:
    """The 1-minute load average now; None where the system has none (Windows)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def wait_for_quiet(max_wait_s: float, threshold: float = QUIET_LOAD, *, poll_s: float = POLL_S,
                   load: Callable[[], Optional[float]] = one_minute_load,
                   sleep: Callable[[float], None] = time.sleep) -> Optional[float]:
    """Poll the 1-minute load every ``poll_s`` seconds until it is at most ``threshold`` or
    ``max_wait_s`` seconds have passed; return the last load read (None: no load average here).
    ``load`` and ``sleep`` are the clock's seams for tests."""
    waited = 0.0
    current = load()
    while current is not None and current > threshold and waited < max_wait_s:
        step = min(poll_s, max_wait_s - waited)
        sleep(step)
        waited += step
        current = load()
    return current


def _first(value: Load) -> Optional[float]:
    """The 1-minute figure of a stored load: a float, or os.getloadavg()'s (1, 5, 15) triple."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return None
    return float(value[0]) if isinstance(value, (list, tuple)) else float(value)


def under_load(load_start: Load, load_end: Load = None, threshold: float = QUIET_LOAD) -> bool:
    """Whether either recorded 1-minute load is above ``threshold``."""
    return any(v is not None and v > threshold for v in (_first(load_start), _first(load_end)))


def load_banner(load_start: Load, load_end: Load = None, threshold: float = QUIET_LOAD) -> str:
    """The line a page opens with when it was measured under load ("" when it was not):
    "> Measured under load 2.3 ...". Loads: floats or os.getloadavg() triples, as stored."""
    if not under_load(load_start, load_end, threshold):
        return ""
    start, end = _first(load_start), _first(load_end)
    worst = max(v for v in (start, end) if v is not None)
    where = ", ".join(f"{when} {v:.1f}" for when, v in (("start", start), ("end", end)) if v is not None)
    return (f"> Measured under load {worst:.1f} (1-minute load average at {where}; quiet is {threshold:g} or "
            "less): other work shared the machine, so its times are slower and noisier than a quiet "
            "machine's; compare only what was timed side by side.")


def writes_results(paths: Iterable[Optional[str]], results: Path = RESULTS) -> bool:
    """Whether any of ``paths`` (files or folders; None ignored) lies in ``docs/results/``."""
    target = results.resolve()
    for path in paths:
        if path is None:
            continue
        resolved = Path(path).resolve()
        if resolved == target or target in resolved.parents:
            return True
    return False


def refusal(program: str, load: Optional[float], waited_s: float, threshold: float = QUIET_LOAD) -> Optional[str]:
    """The one-line refusal when ``load`` (after waiting ``waited_s`` seconds) is above
    ``threshold``, else None."""
    if load is None or load <= threshold:
        return None
    return (f"{program}: error: the 1-minute load average is {load:.1f} after waiting up to {waited_s:g} s "
            f"(quiet is {threshold:g} or less): nothing written to docs/results/; measure on a quiet "
            "machine, or pass --allow-load to write the page with a 'measured under load' banner")


def add_load_arguments(parser, default_wait_s: float = 600.0) -> None:
    """Add --load-wait and --allow-load (an argparse parser): the rule above, for a command that
    may write into docs/results/."""
    parser.add_argument("--load-wait", type=float, default=default_wait_s,
                        help="when writing into docs/results/: first wait up to this many seconds for the "
                             f"1-minute load average to fall to {QUIET_LOAD:g} (default {default_wait_s:g})")
    parser.add_argument("--allow-load", action="store_true",
                        help="write into docs/results/ even when the load is still above "
                             f"{QUIET_LOAD:g} after the wait; the page then opens with 'Measured under load N'")


def load_at_start(program: str, destinations: Iterable[Optional[str]], max_wait_s: float,
                  allow_load: bool) -> Optional[List[float]]:
    """The load average (1, 5, 15 min) at the start of a measurement ([] where the system has
    none), after the quiet wait when any of ``destinations`` lies in docs/results/; None, with
    the one-line refusal printed on stderr, when the machine stayed busy and ``allow_load`` is
    false (the caller exits 2)."""
    if writes_results(destinations):
        load = wait_for_quiet(max_wait_s)
        message = refusal(program, load, max_wait_s)
        if message and not allow_load:
            print(message, file=sys.stderr)
            return None
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []  # []: none here
