"""Running the cases of ``longformer-bench`` in worker processes: on CPU each case's memory is
measured in a fresh forked process (fresh memory counters and allocator state, crash isolation),
and the contenders of one length are timed side by side, round-robin, each in a worker of its
own, so that a busy spell of a shared machine falls on all of them alike. On CUDA everything runs
in this process, one case after the other.
"""
import multiprocessing
import os
import resource
import statistics
import time
import traceback
from typing import Dict, List, Optional

import torch

from .contenders import Case, unavailable_reason
from .measure import Result, make_runner, status_kb, tune_malloc_for_measuring, measure

def _is_oom(error: BaseException) -> bool:
    text = str(error).lower()
    return (isinstance(error, MemoryError) or "out of memory" in text or "can't allocate memory" in text
            or "cannot allocate memory" in text or "not enough memory" in text)


def _measure_guarded(case: Case, phases=("memory", "time")) -> Result:
    try:
        return measure(case, phases)
    except Exception as error:  # noqa: BLE001 (every failure becomes a recorded entry)
        return _failure(case, error)


def _limit_address_space(case: Case) -> None:
    if case.memory_limit_mb:
        # Cap the address space so that an oversized case fails with an allocation error here
        # instead of pushing the machine into the OOM killer.
        limit = status_kb("VmSize") * 1024 + int(case.memory_limit_mb * 2 ** 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child(case: Case, phases, connection) -> None:
    _limit_address_space(case)
    if "memory" in phases:
        tune_malloc_for_measuring()
    connection.send(_measure_guarded(case, phases))
    connection.close()


def _failure(case: Case, error: BaseException) -> Result:
    if _is_oom(error):
        return Result(case, status="oom", note=f"{type(error).__name__}: {str(error)[:200]}")
    return Result(case, status="error", note=traceback.format_exc(limit=3)[-600:])


def _timing_worker(case: Case, connection) -> None:
    """Serve timed calls for one contender: answers None (ready) or a failed Result once set up,
    then the milliseconds of each "fwd" / "fwd_bwd" it is asked for, until "stop"."""
    _limit_address_space(case)
    try:
        runner = make_runner(case)
        why = runner.first_timing()
    except Exception as error:  # noqa: BLE001 (every failure becomes a recorded entry)
        connection.send(_failure(case, error))
        return
    if why:
        connection.send(Result(case, status="too_slow", note=why))
        return
    connection.send(None)
    while True:
        call = connection.recv()
        if call == "stop":
            return
        connection.send(runner.timed(call))


def _died(case: Case, process) -> Result:
    process.join(5)
    code = process.exitcode
    status = "oom" if code == -9 else "error"
    return Result(case, status=status, note=f"worker died with exit code {code}"
                  + (" (SIGKILL: out of memory?)" if code == -9 else ""))


def _run_forked(case: Case, phases, hard_timeout: float) -> Result:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(case, phases, send), daemon=True)
    process.start()
    send.close()
    try:
        if receive.poll(hard_timeout):
            result = receive.recv()
        else:
            result = Result(case, status="too_slow", note=f"killed after {hard_timeout:.0f} s")
    except EOFError:
        result = _died(case, process)
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receive.close()
    return result


def busy_cores(interval: float = 1.0) -> Optional[float]:
    """How many CPU cores the machine kept busy over the next ``interval`` seconds (Linux
    /proc/stat), or None. Called while this benchmark computes nothing, it is the other work on
    the machine, which would distort the timings."""
    def sample():
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])
    try:
        busy0, total0 = sample()
        time.sleep(interval)
        busy1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    if total1 == total0:
        return None
    return (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)


def wait_until_quiet(below: float, max_wait: float) -> Optional[float]:
    """Wait (at most ``max_wait`` seconds) until the machine's other work uses fewer than
    ``below`` cores; returns the last measurement."""
    deadline = time.time() + max_wait
    busy = busy_cores()
    while busy is not None and busy >= below and time.time() < deadline:
        time.sleep(5)
        busy = busy_cores()
    return busy


def _hard_timeout(case: Case) -> float:
    return case.time_cap * (2 * case.repeats + 4) + 120


def measure_memory(case: Case) -> Result:
    """Peak memory (and the output fingerprint) of one case: on CPU in a fresh forked process
    (fresh memory counters and allocator state, crash isolation), on CUDA in this process."""
    reason = unavailable_reason(case)
    if reason:
        return Result(case, status="n/a", note=reason)
    if not getattr(case, "measures_memory", True):
        return Result(case)  # timed only (the matmul limit's worker): no memory to report
    if case.device == "cuda":
        result = _measure_guarded(case, ("memory",))
        torch.cuda.empty_cache()
        return result
    return _run_forked(case, ("memory",), _hard_timeout(case))


def time_side_by_side(cases: List[Case]) -> Dict[int, Result]:
    """Time contenders of one length side by side: on CPU each gets a forked worker with its
    module and inputs set up and warmed up, then the workers are called in turn, round-robin,
    ``repeats`` times (forward, then forward+backward), so that a slower or faster spell of a
    shared machine falls on every contender alike instead of on whichever ran then. On CUDA
    the cases are timed one after the other in this process. Returns {index in cases: Result}
    with the timings (memory fields left empty)."""
    results: Dict[int, Result] = {}
    if not cases:
        return results
    if cases[0].device == "cuda":
        for index, case in enumerate(cases):
            results[index] = _measure_guarded(case, ("time",))
            torch.cuda.empty_cache()
        return results
    context = multiprocessing.get_context("fork")
    workers = {}
    try:
        for index, case in enumerate(cases):  # set up one at a time: no contention while warming up
            parent, child = context.Pipe()
            process = context.Process(target=_timing_worker, args=(case, child), daemon=True)
            process.start()
            child.close()
            try:
                if not parent.poll(_hard_timeout(case)):
                    results[index] = Result(case, status="too_slow", note="no answer while setting up")
                    process.kill()
                    continue
                failed = parent.recv()
            except EOFError:
                failed = _died(case, process)
            if failed is not None:
                results[index] = failed
                continue
            workers[index] = (case, parent, process)
            results[index] = Result(case)
        for _ in range(max((case.repeats for case in cases), default=0)):
            for index, (case, connection, process) in list(workers.items()):
                try:
                    for call, series in (("fwd", results[index].fwd_ms_all),
                                         ("fwd_bwd", results[index].fwd_bwd_ms_all)):
                        connection.send(call)
                        if not connection.poll(_hard_timeout(case)):
                            raise EOFError
                        series.append(connection.recv())
                except (EOFError, BrokenPipeError):
                    results[index] = _died(case, process)
                    del workers[index]
        for index in workers:
            result = results[index]
            result.fwd_ms = statistics.median(result.fwd_ms_all)
            result.fwd_bwd_ms = statistics.median(result.fwd_bwd_ms_all)
    finally:
        for _, connection, process in workers.values():
            try:
                connection.send("stop")
            except (BrokenPipeError, OSError):
                pass
        for _, connection, process in workers.values():
            process.join(10)
            if process.is_alive():
                process.kill()
            connection.close()
    return results


def run_side_by_side(cases: List[Case], quiet_below: float = 0.5, quiet_wait: float = 0.0) -> List[Result]:
    """Memory of each case, then the time of every case that ran, side by side (see
    ``time_side_by_side``), after waiting up to ``quiet_wait`` seconds for the machine's other
    work to fall below ``quiet_below`` cores. Cases are contenders at one length."""
    results = [measure_memory(case) for case in cases]
    runnable = [i for i, r in enumerate(results) if r.status == "ok"]
    busy = wait_until_quiet(quiet_below, quiet_wait) if cases and cases[0].device == "cpu" else None
    timings = time_side_by_side([cases[i] for i in runnable])
    for position, index in enumerate(runnable):
        memory, timing = results[index], timings[position]
        timing.busy_cores_before = busy
        timing.peak_fwd_mb, timing.peak_fwd_bwd_mb = memory.peak_fwd_mb, memory.peak_fwd_bwd_mb
        timing.fingerprint = memory.fingerprint
        if timing.status == "ok":
            timing.note = memory.note
        results[index] = timing
    return results


def call_in_fresh_process(function, *args):
    """``function(*args)`` in a forked child, its result returned here: a process that has run
    torch's parallel work may hang the children it forks later, and the workers are forked from
    this one, so one-off computations of a benchmark (its correctness checks) run in a child."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(function, args)


def default_memory_limit_mb(fraction: float = 0.6) -> Optional[float]:
    """A share of the memory available now (Linux), for the forked workers' address-space cap."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024 * fraction
    except OSError:
        pass
    return None
