"""``longformer-bench --busy N``: every contender timed quiet and then beside the standard
competing load (``competing_load``: N spin processes), each point's contenders side by side in
both conditions, and what the load does to each: its slowdown (busy median time / quiet median
time) and its speedup over dense SDPA quiet and busy.

One OpenMP thread that loses its core to another process makes every thread of a parallel
region wait for it; a path of many short regions (the band path) suffers more than one of a few
long ones (dense SDPA). This mode measures that, for a results page to show.
"""
import statistics
from dataclasses import replace
from typing import Dict, List, Optional

from longformer_common.threads import BENCH_INTERVAL, free_threads

from . import competing_load
from .contenders import Case
from .measure import Result
from .workers import time_side_by_side

BUSY_DEFINITION = (
    "busy: the contenders timed again, side by side, while {processes} pure-Python spin process(es) run "
    "(started before and killed after the point's timing); slowdown = busy median fwd+bwd time / quiet "
    "median fwd+bwd time; speedup vs dense = dense time / this time in the same round, median (min-max) "
    "over the rounds, quiet and busy")


def time_beside_load(cases: List[Case], processes: int, auto_most: Optional[int] = None) -> List[Result]:
    """The time of each of ``cases`` (side by side, no memory) while ``processes`` spinners run.
    ``auto_most`` (the --threads auto policy, at most that many): every case runs with the cores
    left free beside the spinners, measured once they run (the same count for every contender)."""
    bound = 600 + sum((c.time_cap or 60) * (c.repeats + 2) for c in cases)  # seconds; killed sooner
    with competing_load.competing_load(processes, bound):
        if auto_most:
            count = free_threads(auto_most, interval=BENCH_INTERVAL)  # measured with the spinners running
            cases = [replace(case, threads=count) for case in cases]
        timings = time_side_by_side(cases)
    return [timings[i] for i in range(len(cases))]


def threads_line(report: dict) -> str:
    """How many threads each condition ran with, for a page ("" for a run before the thread policy)."""
    settings = report.get("settings", {})
    if "thread_policy" not in settings:
        return ""
    busy = sorted({row["threads"] for row in report.get("busy_results", []) if row.get("threads")})
    quiet = settings.get("threads_quiet", settings.get("threads"))
    return (f"Threads: {settings['thread_policy']}; {quiet} quiet, "
            f"{'/'.join(map(str, busy)) or quiet} beside the busy process(es), every contender alike.")


def _spread(values: List[float]) -> Optional[dict]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


def _round_speedups(base: List[float], mine: List[float]) -> List[float]:
    """dense time / this time, call by call (the workers run round-robin: call i is round i)."""
    return [b / m for b, m in zip(base, mine) if b and m] if len(base) == len(mine) else []


def summary(quiet: List[dict], busy: List[dict], baseline: str = "dense") -> List[dict]:
    """One entry per contender and point measured in both conditions (rows of ``add_ratios``):
    quiet and busy fwd+bwd ms, slowdown, and speedup over ``baseline`` in each condition (each a
    {"median", "min", "max"}; slowdown's min-max = fastest busy / slowest quiet .. slowest busy /
    fastest quiet)."""
    def key(row):
        return row["impl"], row["length"], row["global_tokens"], row.get("dropout")

    quiet_by, busy_by = {key(r): r for r in quiet}, {key(r): r for r in busy}
    entries = []
    for k, q in quiet_by.items():
        b = busy_by.get(k)
        if b is None or q["status"] != "ok" or b["status"] != "ok":
            continue
        q_all, b_all = q["fwd_bwd_ms_all"], b["fwd_bwd_ms_all"]
        entry: Dict = {"impl": k[0], "length": k[1], "global_tokens": k[2], "dropout": k[3],
                       "quiet_ms": _spread(q_all), "busy_ms": _spread(b_all),
                       "slowdown": {"median": b["fwd_bwd_ms"] / q["fwd_bwd_ms"], "min": min(b_all) / max(q_all),
                                    "max": max(b_all) / min(q_all)}}
        for condition, rows in (("quiet", quiet_by), ("busy", busy_by)):
            base = rows.get((baseline, *k[1:]))
            mine = rows[k]
            entry[f"speedup_vs_{baseline}_{condition}"] = (
                _spread(_round_speedups(base["fwd_bwd_ms_all"], mine["fwd_bwd_ms_all"]))
                if base is not None and base["status"] == "ok" else None)
        entries.append(entry)
    return entries


def _cell(spread: Optional[dict], spec: str) -> str:
    if not spread:
        return "-"
    return f"{spec.format(spread['median'])} ({spec.format(spread['min'])}-{spec.format(spread['max'])})"


def table_lines(entries: List[dict], baseline: str = "dense") -> List[str]:
    """The markdown table of ``summary`` (also printed by the command)."""
    lines = [f"| N | G | contender | p | quiet fwd+bwd ms | busy fwd+bwd ms | slowdown (busy / quiet) | "
             f"speedup vs {baseline}, quiet | speedup vs {baseline}, busy |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for e in entries:
        lines.append("| " + " | ".join([
            f"{e['length']:,}", str(e["global_tokens"]), e["impl"], "-" if e["dropout"] is None else f"{e['dropout']:g}",
            _cell(e["quiet_ms"], "{:,.1f}"), _cell(e["busy_ms"], "{:,.1f}"), _cell(e["slowdown"], "{:.2f}"),
            _cell(e[f"speedup_vs_{baseline}_quiet"], "{:.2f}"), _cell(e[f"speedup_vs_{baseline}_busy"], "{:.2f}")]) + " |")
    return lines


def page_lines(report: dict) -> List[str]:
    """The page's section on the busy run ([] for a run without --busy)."""
    entries = report.get("busy_summary")
    if not entries:
        return []
    processes = report.get("settings", {}).get("busy", 1)
    threads = threads_line(report)
    return ["## Beside a busy process", "", BUSY_DEFINITION.format(processes=processes) + ".", "",
            *([threads, ""] if threads else []), *table_lines(entries), ""]
