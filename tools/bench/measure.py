"""Measuring one case of ``longformer-bench`` in this process: time and peak memory, forward and
forward+backward (``measure``). ``workers`` runs it in fresh processes and side by side.

Memory on CPU (see ``MEMORY_HELP``): peak memory is the rise of the process's resident set above
its level once the module, weights and inputs exist: glibc is told to give every large freed block
back at once (``mallopt``), and Linux's peak-RSS counter (VmHWM) is reset through
/proc/self/clear_refs just before the measured call and read right after it. On CUDA it is
``torch.cuda.max_memory_allocated`` above the allocated memory before the call.
"""
import ctypes
import gc
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional

import torch
from torch import Tensor

from .contenders import Case, build_contender, make_inputs, shared_weights

MEMORY_HELP = (
    "Peak memory (MB) is what the measured call adds on top of the module, its weights and its "
    "inputs. On CPU each case runs in a fresh forked process (timing in another one): glibc is "
    "set to serve every block of 64 KiB or more by its own mmap, returned to the kernel when "
    "freed (mallopt), so that resident memory follows live memory instead of allocator reuse "
    "luck; after a small warm-up call (library initialisation) freed heap is trimmed and Linux's "
    "peak resident-set counter is reset (/proc/self/clear_refs); the peak RSS reached during the "
    "call minus the RSS before it is reported. This counts every page the call touches (PyTorch "
    "tensors, library scratch buffers), not only tensors. On CUDA it is "
    "torch.cuda.max_memory_allocated() minus the memory allocated before the call. Forward is "
    "measured under torch.no_grad() (inference); forward+backward keeps what autograd saves and "
    "includes the weight and input gradients."
)


@dataclass
class Result:
    case: Case
    status: str = "ok"  # ok | oom | too_slow | n/a | error
    note: str = ""
    fwd_ms: Optional[float] = None
    fwd_bwd_ms: Optional[float] = None
    fwd_ms_all: List[float] = field(default_factory=list)
    fwd_bwd_ms_all: List[float] = field(default_factory=list)
    peak_fwd_mb: Optional[float] = None
    peak_fwd_bwd_mb: Optional[float] = None
    fingerprint: Optional[List[float]] = None
    busy_cores_before: Optional[float] = None  # other work on the machine just before timing

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("case")
        data.update(impl=self.case.impl, length=self.case.length, global_tokens=self.case.global_tokens,
                    threads=self.case.threads)
        if self.case.dropout is not None:
            data["dropout"] = self.case.dropout
        return data


def status_kb(field_name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field_name} not in /proc/self/status")


class CpuPeakMemory:
    """Peak resident memory of a block of code, above the level just before it (see MEMORY_HELP)."""

    def __init__(self):
        try:
            self._libc = ctypes.CDLL("libc.so.6")
        except OSError:
            self._libc = None
        self.method = "VmHWM reset via /proc/self/clear_refs"

    def _settle(self) -> int:
        gc.collect()
        if self._libc is not None:
            self._libc.malloc_trim(0)  # give freed heap pages back, so they are not counted as free
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")  # "5" resets the peak-RSS counter to the current RSS
        except OSError:
            self.method = "VmHWM since process start (clear_refs not writable): an upper bound"
        return status_kb("VmRSS")

    def __enter__(self):
        self.start_kb = self._settle()
        return self

    def __exit__(self, *exc):
        self.peak_mb = max(0, status_kb("VmHWM") - self.start_kb) / 1024


class CudaPeakMemory:
    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        self.start = torch.cuda.memory_allocated()
        self.method = "torch.cuda.max_memory_allocated"
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.peak_mb = (torch.cuda.max_memory_allocated() - self.start) / 2 ** 20


def output_fingerprint(out: Tensor, global_tokens: int) -> List[float]:
    """A few output values (global rows, a local row next to them, the middle, the end)."""
    length = out.shape[1]
    rows = sorted({0, min(global_tokens, length - 1), length // 2, length - 1})
    return out[0, rows, :8].double().flatten().tolist()


def tune_malloc_for_measuring() -> bool:
    """glibc: serve every allocation of 64 KiB or more by its own mmap, returned to the kernel
    when freed. Without this, glibc's dynamic threshold keeps freed blocks of up to 32 MiB in its
    heaps, and the peak resident set depends on how earlier blocks happened to be reused (runs of
    the same case differed by 30 MB); with it, resident memory follows the live blocks."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # from malloc.h
    return bool(libc.mallopt(m_mmap_threshold, 64 * 1024)) and bool(libc.mallopt(m_trim_threshold, 128 * 1024))


class Runner:
    """One contender ready to run at one case's length: module, inputs, and the two calls."""

    def __init__(self, case: Case):
        self.case = case
        device, dtype = torch.device(case.device), getattr(torch, case.dtype)
        torch.set_num_threads(case.threads)
        torch.manual_seed(0)
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        weights = shared_weights(case.hidden)
        # warm-up at a small length (library initialisation, thread pools, kernel compilation)
        small = min(case.length, 2 * case.window)  # 2w: the smallest length HF accepts
        self.x, self.grad_out, is_global = make_inputs(case, small, device, dtype)
        self.module, self.f = build_contender(case, device, dtype, weights, is_global)
        self.fwd_bwd()
        del self.module, self.f, self.x, self.grad_out, is_global
        self.x, self.grad_out, is_global = make_inputs(case, case.length, device, dtype)
        self.module, self.f = build_contender(case, device, dtype, weights, is_global)

    def fwd(self) -> Tensor:
        with torch.no_grad():
            out = self.f(self.x)
        self.sync()
        return out

    def eval_fwd(self) -> Tensor:
        """``fwd`` in eval mode, without dropout: the function every contender computes alike."""
        self.module.eval()
        try:
            return self.fwd()
        finally:
            self.module.train()

    def fwd_bwd(self) -> Tensor:
        for p in self.module.parameters():
            p.grad = None  # as optimizer.zero_grad(set_to_none=True) leaves them
        x = self.x.detach().requires_grad_()
        out = self.f(x)
        out.backward(self.grad_out)
        self.sync()
        return out

    def timed(self, call: str) -> float:
        """Milliseconds of one ``fwd`` or ``fwd_bwd`` call."""
        start = time.perf_counter()
        getattr(self, call)()
        return (time.perf_counter() - start) * 1e3

    def first_timing(self) -> Optional[str]:
        """One forward+backward (timed against --time-cap) and one forward, as warm-up at full
        length; returns why the case is too slow, or None."""
        first = self.timed("fwd_bwd")
        if first > self.case.time_cap * 1e3:
            return f"one forward+backward took {first / 1e3:.1f} s > --time-cap {self.case.time_cap:g} s"
        self.fwd()
        return None


class WholeModelRunner(Runner):
    """A ``Runner`` of a whole fairseq model on CPU in float32 (the LED encoder, the char-LM):
    a subclass names itself (``benchmark``), builds the module (``build``: (module, dictionary)),
    sets its inputs at a length (``set_inputs``) and says how short its warm-up call may be
    (``warmup_length``); ``fwd`` and ``fwd_bwd`` are its own."""

    benchmark = "whole-model"

    def __init__(self, case: Case):
        self.case = case
        if case.device != "cpu" or case.dtype != "float32":
            raise ValueError(f"the {self.benchmark} benchmark runs on CPU in float32")
        torch.set_num_threads(case.threads)
        self.sync = lambda: None
        self.module, self.dictionary = self.build(case)
        # warm-up at a small length (thread pools, first allocations), then the measured input
        self.set_inputs(min(case.length, self.warmup_length(case)))
        self.fwd_bwd()
        self.set_inputs(case.length)

    def build(self, case: Case):
        raise NotImplementedError

    def set_inputs(self, length: int) -> None:
        raise NotImplementedError

    def warmup_length(self, case: Case) -> int:
        raise NotImplementedError


def make_runner(case: Case) -> Runner:
    """The runner of ``case``: its own when the case brings one (``case.make_runner()``, a
    benchmark of whole models such as ``led_encoder``), else the attention contenders' ``Runner``."""
    own = getattr(case, "make_runner", None)
    return own() if own is not None else Runner(case)


def measure(case: Case, phases=("memory", "time")) -> Result:
    """Run one case in this process: peak memory and/or time. On CPU ``run_case`` measures
    memory in a fresh process and ``time_side_by_side`` times the contenders in processes of
    their own, because measuring memory tunes the allocator in a way that would change the
    timings (more page faults)."""
    result = Result(case)
    runner = make_runner(case)
    cuda = case.device == "cuda"
    if "memory" in phases:
        peak = CudaPeakMemory if cuda else CpuPeakMemory
        with peak() as meter:
            out = runner.fwd()
        result.peak_fwd_mb = meter.peak_mb
        # with dropout each contender draws its own masks: compare the function without them
        result.fingerprint = output_fingerprint(runner.eval_fwd() if case.dropout else out, case.global_tokens)
        del out
        with peak() as meter:
            runner.fwd_bwd()
        result.peak_fwd_bwd_mb = meter.peak_mb
        result.note = meter.method
    if "time" not in phases:
        return result
    why = runner.first_timing()
    if why:
        result.status, result.note = "too_slow", why
        return result
    for _ in range(case.repeats):
        result.fwd_ms_all.append(runner.timed("fwd"))
        result.fwd_bwd_ms_all.append(runner.timed("fwd_bwd"))
    result.fwd_ms = statistics.median(result.fwd_ms_all)
    result.fwd_bwd_ms = statistics.median(result.fwd_bwd_ms_all)
    return result
