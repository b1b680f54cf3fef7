"""Measure whole self-attention modules: time and peak memory, forward and forward+backward.

Used by ``longformer-bench`` (``fairseq_longformer/cli/bench.py``), the paper's Figure 1 on the
machine at hand. Every contender maps input hidden states (B, N, C) to the heads' attention
output (B, N, C), q/k/v (and global q/k/v) projections included: the boundary of Hugging Face's
``LongformerSelfAttention``, whose output projection lives in another module. With
``output_projection=True`` (``--output-projection``) every contender also ends in the output
projection, as a whole attention block does.

  dense   q/k/v (+ global q/k/v) projections, ``F.scaled_dot_product_attention`` over all N keys
          with a boolean (N, N) mask of the same Longformer pattern (band + global columns);
          global rows from a second SDPA with the global projections.
  torch   our LongformerSelfAttention with the vectorized PyTorch path (``impl="torch"``),
          through ``attend`` (everything before its out_proj).
  triton  the same module with the Triton kernel (CUDA only).
  hf      Hugging Face's LongformerSelfAttention (transformers); with the output projection, a
          Linear plays the part of HF's ``LongformerAttention.output.dense``.

All contenders get identical weights and inputs, so their outputs must agree: each run returns
a fingerprint of its output and the report gives the largest difference to the others.

Memory on CPU (see ``MEMORY_HELP``): every case runs in fresh processes forked from the parent,
which has imported everything but computed nothing, one for memory and one for time. Peak memory
is the rise of the process's resident set above its level once the module, weights and inputs
exist: glibc is told to give every large freed block back at once (``mallopt``), and Linux's
peak-RSS counter (VmHWM) is reset through /proc/self/clear_refs just before the measured call
and read right after it. On CUDA it is ``torch.cuda.max_memory_allocated`` above the allocated
memory before the call.
"""
import ctypes
import gc
import multiprocessing
import os
import resource
import statistics
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import AttentionMasks, AttentionPattern
from .modules.self_attention import LongformerLayerConfig, LongformerSelfAttention

CONTENDERS = ("dense", "torch", "triton", "hf")

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
class Case:
    """One measurement: a contender at one length and global-token count."""

    impl: str
    length: int
    global_tokens: int
    batch: int = 1
    heads: int = 12
    head_dim: int = 64
    window: int = 256  # one-sided (HF's attention_window is 2 * window)
    device: str = "cpu"
    dtype: str = "float32"
    repeats: int = 3
    threads: int = 2
    time_cap: float = 60.0  # seconds for one forward+backward before the case counts as too slow
    output_projection: bool = False  # end every contender in the output projection too
    memory_limit_mb: Optional[float] = None  # CPU: address-space headroom for the forked process

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim


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
        data.update(impl=self.case.impl, length=self.case.length, global_tokens=self.case.global_tokens)
        return data


# ----------------------------------------------------------------------------------------------
# Contenders
# ----------------------------------------------------------------------------------------------
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "q_global_proj", "k_global_proj", "v_global_proj", "out_proj")


def shared_weights(hidden: int, seed: int = 0) -> Dict[str, Tuple[Tensor, Tensor]]:
    """The same (weight, bias) for every contender, by our parameter names."""
    gen = torch.Generator().manual_seed(seed)
    return {name: (torch.randn(hidden, hidden, generator=gen) * hidden ** -0.5,
                   torch.randn(hidden, generator=gen) * 0.02) for name in PROJECTIONS}


def _load(linear: nn.Linear, weight_bias: Tuple[Tensor, Tensor]) -> None:
    with torch.no_grad():
        linear.weight.copy_(weight_bias[0])
        linear.bias.copy_(weight_bias[1])


def dense_pattern_mask(length: int, window: int, is_global: Tensor) -> Tensor:
    """(B, 1, N, N) bool, True where a local query may attend: the band |i - j| <= w and every
    global key. Global query rows are recomputed with the global projections, so their row here
    only has to be non-empty."""
    positions = torch.arange(length, device=is_global.device)
    band = (positions[:, None] - positions[None, :]).abs() <= window
    return (band[None] | is_global[:, None, :])[:, None]


class DenseSDPASelfAttention(nn.Module):
    """Full self-attention with the Longformer pattern as a dense boolean mask (the baseline).

    Input (B, N, C), output (B, N, C); the (B, 1, N, N) mask is built once per input, outside
    the module, as a model would share it across its layers.
    """

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        for name in PROJECTIONS:
            setattr(self, name, nn.Linear(hidden, hidden))

    def _split(self, x: Tensor) -> Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor, is_global: Optional[Tensor], output_projection: bool) -> Tensor:
        q, k, v = (self._split(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, N, D)
        if is_global is not None:
            # global rows attend every key with the global projections; (B, G) positions, the
            # same count in every row (as in the benchmark)
            index = is_global.nonzero()[:, 1].view(x.shape[0], -1)
            x_glob = x.gather(1, index[..., None].expand(-1, -1, x.shape[2]))
            q_g = self._split(self.q_global_proj(x_glob))
            k_g, v_g = self._split(self.k_global_proj(x)), self._split(self.v_global_proj(x))
            glob = F.scaled_dot_product_attention(q_g, k_g, v_g)  # (B, H, G, D)
            out = out.scatter(2, index[:, None, :, None].expand(-1, self.heads, -1, self.head_dim), glob)
        out = out.transpose(1, 2).reshape(x.shape)
        return self.out_proj(out) if output_projection else out


def hf_available() -> Tuple[bool, str]:
    try:
        from transformers.models.longformer import modeling_longformer  # noqa: F401
    except Exception as error:  # ImportError, or OSError from a broken torchaudio beside it
        return False, f"transformers' Longformer does not import: {type(error).__name__}: {error}"
    return True, ""


def build_contender(case: Case, device: torch.device, dtype: torch.dtype,
                    weights: Dict[str, Tuple[Tensor, Tensor]], is_global: Tensor
                    ) -> Tuple[nn.Module, Callable[[Tensor], Tensor]]:
    """(module, f) where f maps hidden states (B, N, C) to (B, N, C) for this case's length."""
    glob = is_global if bool(is_global.any()) else None
    if case.impl == "dense":
        module = DenseSDPASelfAttention(case.hidden, case.heads)
        for name in PROJECTIONS:
            _load(getattr(module, name), weights[name])
        module = module.to(device, dtype)
        mask = dense_pattern_mask(is_global.shape[1], case.window, is_global)
        return module, lambda x: module(x, mask, glob, case.output_projection)
    if case.impl in ("torch", "triton"):
        config = LongformerLayerConfig(AttentionPattern(window=case.window), impl=case.impl)
        module = LongformerSelfAttention(case.hidden, case.heads, config)
        for name in PROJECTIONS:
            _load(getattr(module, name), weights[name])
        module = module.to(device, dtype)
        masks = AttentionMasks(padding=None, is_global=is_global)
        if case.output_projection:
            return module, lambda x: module(x.transpose(0, 1), key_padding_mask=masks)[0].transpose(0, 1)
        return module, lambda x: module.attend(x.transpose(0, 1), masks).transpose(0, 1)
    if case.impl == "hf":
        from transformers.models.longformer import modeling_longformer as hf

        config = hf.LongformerConfig(
            hidden_size=case.hidden, num_attention_heads=case.heads, num_hidden_layers=1,
            attention_window=[2 * case.window], attention_probs_dropout_prob=0.0,
        )
        module = nn.ModuleDict({"self": hf.LongformerSelfAttention(config, layer_id=0),
                                "dense": nn.Linear(case.hidden, case.hidden)})
        hf_names = ("query", "key", "value", "query_global", "key_global", "value_global")
        for ours, theirs in zip(PROJECTIONS, hf_names):
            _load(getattr(module["self"], theirs), weights[ours])
        _load(module["dense"], weights["out_proj"])
        module = module.to(device, dtype)
        # the mask as LongformerModel hands it to its layers (transformers 5.x): < 0 padding,
        # 0 local, > 0 global, and the three flags LongformerEncoder derives from it once
        hf_mask = torch.zeros(is_global.shape, dtype=dtype, device=device)
        hf_mask = hf_mask.masked_fill(is_global, torch.finfo(dtype).max)
        flags = dict(is_index_masked=hf_mask < 0, is_index_global_attn=hf_mask > 0,
                     is_global_attn=glob is not None)
        if case.output_projection:
            return module, lambda x: module["dense"](module["self"](x, attention_mask=hf_mask, **flags)[0])
        return module, lambda x: module["self"](x, attention_mask=hf_mask, **flags)[0]
    raise ValueError(f"unknown contender {case.impl!r}; expected one of {CONTENDERS}")


def unavailable_reason(case: Case) -> Optional[str]:
    """Why this contender cannot run this case here, or None."""
    if case.impl == "triton" and case.device != "cuda":
        return "triton needs CUDA"
    if case.impl == "hf":
        ok, why = hf_available()
        if not ok:
            return why
        if case.length % (2 * case.window):
            return f"HF needs N to be a multiple of its window 2w = {2 * case.window}"
    if case.global_tokens > case.length:
        return "more global tokens than positions"
    return None


# ----------------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------------
def _status_kb(field_name: str) -> int:
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
        return _status_kb("VmRSS")

    def __enter__(self):
        self.start_kb = self._settle()
        return self

    def __exit__(self, *exc):
        self.peak_mb = max(0, _status_kb("VmHWM") - self.start_kb) / 1024


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


def _inputs(case: Case, length: int, device, dtype):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(case.batch, length, case.hidden, generator=gen).to(device, dtype)
    grad_out = torch.randn(case.batch, length, case.hidden, generator=gen).to(device, dtype)
    is_global = torch.zeros(case.batch, length, dtype=torch.bool, device=device)
    is_global[:, :case.global_tokens] = True  # leading tokens, as [CLS] or a question would be
    return x, grad_out, is_global


def _fingerprint(out: Tensor, global_tokens: int) -> List[float]:
    """A few output values (global rows, a local row next to them, the middle, the end)."""
    length = out.shape[1]
    rows = sorted({0, min(global_tokens, length - 1), length // 2, length - 1})
    return out[0, rows, :8].double().flatten().tolist()


def _tune_malloc_for_measuring() -> bool:
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


class _Runner:
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
        self.x, self.grad_out, is_global = _inputs(case, small, device, dtype)
        self.module, self.f = build_contender(case, device, dtype, weights, is_global)
        self.fwd_bwd()
        del self.module, self.f, self.x, self.grad_out, is_global
        self.x, self.grad_out, is_global = _inputs(case, case.length, device, dtype)
        self.module, self.f = build_contender(case, device, dtype, weights, is_global)

    def fwd(self) -> Tensor:
        with torch.no_grad():
            out = self.f(self.x)
        self.sync()
        return out

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


def measure(case: Case, phases=("memory", "time")) -> Result:
    """Run one case in this process: peak memory and/or time. On CPU ``run_case`` measures
    memory in a fresh process and ``time_side_by_side`` times the contenders in processes of
    their own, because measuring memory tunes the allocator in a way that would change the
    timings (more page faults)."""
    result = Result(case)
    runner = _Runner(case)
    cuda = case.device == "cuda"
    if "memory" in phases:
        peak = CudaPeakMemory if cuda else CpuPeakMemory
        with peak() as meter:
            out = runner.fwd()
        result.peak_fwd_mb = meter.peak_mb
        result.fingerprint = _fingerprint(out, case.global_tokens)
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
        limit = _status_kb("VmSize") * 1024 + int(case.memory_limit_mb * 2 ** 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child(case: Case, phases, connection) -> None:
    _limit_address_space(case)
    if "memory" in phases:
        _tune_malloc_for_measuring()
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
        runner = _Runner(case)
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


# ----------------------------------------------------------------------------------------------
# Ratios and reporting
# ----------------------------------------------------------------------------------------------
def _ratio(numerator, denominator) -> Optional[float]:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def add_ratios(results: List[Result]) -> List[dict]:
    """JSON rows with speedups (baseline time / time) and memory ratios (memory / baseline
    memory) against HF and dense measured in the same run, and the output agreement."""
    rows = [r.to_json() for r in results]
    by_key = {(r["impl"], r["length"], r["global_tokens"]): r for r in rows}
    for row in rows:
        key = (row["length"], row["global_tokens"])
        fingerprints = [other["fingerprint"] for other in rows
                        if (other["length"], other["global_tokens"]) == key and other["fingerprint"]
                        and other is not row]
        row["max_abs_diff_vs_others"] = (
            max(max(abs(a - b) for a, b in zip(row["fingerprint"], other)) for other in fingerprints)
            if row["fingerprint"] and fingerprints else None)
        row["ratios"] = {}
        ok = row["status"] == "ok"
        for base in ("hf", "dense"):
            other = by_key.get((base, *key))
            base_ok = other is not None and other["status"] == "ok"
            row["ratios"][f"fwd_speedup_vs_{base}"] = _ratio(other["fwd_ms"], row["fwd_ms"]) if ok and base_ok else None
            row["ratios"][f"fwd_bwd_speedup_vs_{base}"] = (
                _ratio(other["fwd_bwd_ms"], row["fwd_bwd_ms"]) if ok and base_ok else None)
            has_memory = other is not None and other["peak_fwd_bwd_mb"] is not None and row["peak_fwd_bwd_mb"] is not None
            row["ratios"][f"peak_fwd_bwd_mem_ratio_vs_{base}"] = (
                _ratio(row["peak_fwd_bwd_mb"], other["peak_fwd_bwd_mb"]) if has_memory else None)
            row["ratios"][f"peak_fwd_mem_ratio_vs_{base}"] = (
                _ratio(row["peak_fwd_mb"], other["peak_fwd_mb"]) if has_memory else None)
    return rows


def _fmt(value, spec="{:.0f}", none="-") -> str:
    return none if value is None else spec.format(value)


def format_table(rows: List[dict]) -> str:
    """One block per global-token count: a line per (length, contender)."""
    header = (f"{'N':>6} {'impl':>6} {'status':>8} {'fwd ms':>9} {'fwd+bwd ms':>11} {'fwd MB':>8} "
              f"{'f+b MB':>8} {'xHF f+b':>8} {'xDense f+b':>10} {'mem/HF':>7} {'mem/dense':>9} {'|diff|':>8} {'busy':>5}")
    lines = []
    for global_tokens in sorted({r["global_tokens"] for r in rows}):
        lines.append(f"\nglobal tokens: {global_tokens}   (xHF, xDense: speedup = their time / this time; "
                     "mem/HF, mem/dense: this peak / their peak, forward+backward; |diff|: largest output "
                     "difference to the other contenders; busy: cores used by other work just before timing)")
        lines.append(header)
        lines.append("-" * len(header))
        for row in sorted((r for r in rows if r["global_tokens"] == global_tokens),
                          key=lambda r: (r["length"], CONTENDERS.index(r["impl"]))):
            ratios = row["ratios"]
            status = row["status"] if row["status"] != "too_slow" else "slow"
            lines.append(
                f"{row['length']:>6} {row['impl']:>6} {status:>8} {_fmt(row['fwd_ms']):>9} "
                f"{_fmt(row['fwd_bwd_ms']):>11} {_fmt(row['peak_fwd_mb']):>8} {_fmt(row['peak_fwd_bwd_mb']):>8} "
                f"{_fmt(ratios['fwd_bwd_speedup_vs_hf'], '{:.2f}'):>8} "
                f"{_fmt(ratios['fwd_bwd_speedup_vs_dense'], '{:.2f}'):>10} "
                f"{_fmt(ratios['peak_fwd_bwd_mem_ratio_vs_hf'], '{:.2f}'):>7} "
                f"{_fmt(ratios['peak_fwd_bwd_mem_ratio_vs_dense'], '{:.2f}'):>9} "
                f"{_fmt(row['max_abs_diff_vs_others'], '{:.0e}'):>8} "
                f"{_fmt(row['busy_cores_before'], '{:.1f}'):>5}")
    notes = sorted({f"{r['impl']} N={r['length']} G={r['global_tokens']}: {r['status']}: {r['note']}"
                    for r in rows if r["status"] not in ("ok",)})
    if notes:
        lines.append("\n" + "\n".join(notes))
    return "\n".join(lines)


COLORS = {"dense": "tab:red", "torch": "tab:blue", "triton": "tab:green", "hf": "tab:orange"}
LABELS = {"dense": "full attention (SDPA, dense mask)", "torch": "ours, PyTorch",
          "triton": "ours, Triton", "hf": "Hugging Face Longformer"}


def plot(rows: List[dict], path: str, title: str) -> None:
    """Two log-log panels, time and peak memory against N, forward+backward (solid: no global
    tokens; dashed: with global tokens) and forward only (thin dotted)."""
    import logging

    for name in ("matplotlib", "PIL"):  # a DEBUG root logger would print their font search
        logging.getLogger(name).setLevel(logging.WARNING)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(13, 5))
    global_counts = sorted({r["global_tokens"] for r in rows})
    styles = ["-", "--", "-.", ":"]
    for impl in CONTENDERS:
        for index, global_tokens in enumerate(global_counts):
            series = sorted((r for r in rows if r["impl"] == impl and r["global_tokens"] == global_tokens
                             and r["status"] in ("ok", "too_slow")), key=lambda r: r["length"])
            if not series:
                continue
            style = styles[index % len(styles)]
            label = f"{LABELS[impl]}, {global_tokens} global"
            lengths = [r["length"] for r in series]
            for axis, key, fwd_key in ((time_axis, "fwd_bwd_ms", "fwd_ms"),
                                       (memory_axis, "peak_fwd_bwd_mb", "peak_fwd_mb")):
                values = [r[key] for r in series]
                points = [(n, v) for n, v in zip(lengths, values) if v is not None]
                if points:
                    axis.plot(*zip(*points), style, marker="o", color=COLORS[impl], label=label)
                fwd = [(n, r[fwd_key]) for n, r in zip(lengths, series) if r[fwd_key] is not None]
                if fwd and index == 0:
                    axis.plot(*zip(*fwd), ":", linewidth=1, color=COLORS[impl], alpha=0.6)
            for r in series:
                if r["status"] == "too_slow" and r["fwd_bwd_ms"] is not None:
                    time_axis.plot(r["length"], r["fwd_bwd_ms"], "x", color=COLORS[impl], markersize=10)
            failed = [r for r in rows if r["impl"] == impl and r["global_tokens"] == global_tokens
                      and r["status"] == "oom"]
            for r in failed:
                memory_axis.annotate("OOM", (r["length"], max(v["peak_fwd_bwd_mb"] or 1 for v in series)),
                                     color=COLORS[impl], fontsize=8)
    lengths = sorted({r["length"] for r in rows})
    for axis, ylabel in ((time_axis, "time per call (ms)"), (memory_axis, "peak memory (MB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(lengths, [str(n) for n in lengths])
        axis.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xlabel("sequence length N")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
    time_axis.set_title("time per call, forward+backward")
    memory_axis.set_title("peak memory, forward+backward")
    for axis in (time_axis, memory_axis):
        axis.text(0.99, 0.01, "thin dotted: forward only, no global tokens", transform=axis.transAxes,
                  ha="right", va="bottom", fontsize=7, color="0.3")
    time_axis.legend(fontsize=7, loc="upper left")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
