"""The attention-dropout keep mask applied in one native pass on CPU, with numba (optional).

Why: in eager PyTorch the band's keep mask costs a dozen passes over memory per block of scores
(the hash's nine integer passes over its words, a comparison writing a float mask, a multiply),
and each pass is bound by the cache's bandwidth, not by the arithmetic. Here one loop computes
each 32-bit hash word, compares its four bytes with the threshold and multiplies the four
probabilities it covers, so a score is read and written once: 0.25 ns per score on a 2-core CPU
against about 4 for the eager passes (about 0.5 inside an attention call, where numba's OpenMP
threads and torch's share the cores). The backward's loop recomputes the mask inside the
softmax gradient (kept = P * keep and dS = kept * dP - P * delta in one pass), so nothing is
kept from the forward.

The loops are exactly ``dropout.consecutive_words_``, ``keep_from_words_`` and the eager
multiplies (the tests compare them bit for bit): 32-bit arithmetic is done in int64 lanes
masked to 32 bits (numba's integer products wrap modulo 2^64, as NumPy's do; the low 32 bits
are the uint32 product), a kept score is copied and a dropped one multiplied by zero (as the
eager ``x * 0.0`` does, so a NaN stays NaN), and dS's multiply-add is rounded once, as torch's
CPU ``addcmul`` rounds it.

numba is the ``cpu`` extra (``pip install fairseq-longformer[cpu]``); without it, on another
device or dtype, or with ``LONGFORMER_FUSED_KEEP=0`` in the environment (or
``fused_dropout_mask(False)``), ``BandDropout`` runs the eager passes. numba is imported, and
the loops compiled (about 2 s), on first use.
"""
import logging
import os
import threading
from typing import Optional, Tuple

import torch
from torch import Tensor

from .dropout import DRAW_BITS, KEYS_PER_WORD, LEVELS, MASK32, MIX_MUL_1, MIX_MUL_2

# Off switch for debugging and for the tests that compare this path with the eager one.
ENABLED = os.environ.get("LONGFORMER_FUSED_KEEP", "1") != "0"
_DTYPES = (torch.float32, torch.float64)

_kernels = None
_import_failed = False
# numba's "workqueue" thread pool (its fallback without OpenMP or TBB) aborts the process when
# two threads launch a parallel loop at once: calls are serialised.
_launch_lock = threading.Lock()


def _build():
    """(numba, the compiled-on-first-call loops), or None when numba is missing."""
    global _kernels, _import_failed
    if _kernels is None and not _import_failed:
        try:
            import numba
            import numba.extending
        except ImportError:
            _import_failed = True
            return None
        numba_log = logging.getLogger("numba")
        if numba_log.level == logging.NOTSET:  # its compiler's DEBUG dumps would flood a DEBUG log
            numba_log.setLevel(logging.WARNING)

        @numba.extending.intrinsic
        def fma(typingctx, a, b, c):
            """a * b + c rounded once, as torch's CPU addcmul computes it (checked bit for bit)."""
            return a(a, b, c), lambda context, builder, signature, args: builder.fma(*args)

        @numba.njit(inline="always")
        def word(row, group):
            """lowbias32 after its first step (row and group hold that step of their operands)."""
            x = row ^ group
            x = (x * MIX_MUL_1) & MASK32
            x ^= x >> 15
            x = (x * MIX_MUL_2) & MASK32
            return x ^ (x >> 16)

        @numba.njit(inline="always")
        def masked(value, x, k, threshold):
            """value if draw k of word x keeps it, else value * 0 (as the eager multiply by 0.0)."""
            if (x >> (DRAW_BITS * k)) & (LEVELS - 1) >= threshold:
                return value
            return value * 0

        @numba.njit(parallel=True, nogil=True)
        def keep_times(src, dst, rows, groups, threshold):
            windows, chunk, width = src.shape
            for n in numba.prange(windows * chunk):
                t = n // chunk
                r = n - t * chunk
                for g in range(width // KEYS_PER_WORD):
                    x = word(rows[t, r], groups[t, g])
                    for k in range(KEYS_PER_WORD):
                        col = g * KEYS_PER_WORD + k
                        dst[t, r, col] = masked(src[t, r, col], x, k, threshold)

        @numba.njit(parallel=True, nogil=True)
        def softmax_grad(probs, grad, kept, rows, groups, threshold, delta):
            windows, chunk, width = probs.shape
            for n in numba.prange(windows * chunk):
                t = n // chunk
                r = n - t * chunk
                minus_delta = -delta[t, r, 0]
                for g in range(width // KEYS_PER_WORD):
                    x = word(rows[t, r], groups[t, g])
                    for k in range(KEYS_PER_WORD):
                        col = g * KEYS_PER_WORD + k
                        p = probs[t, r, col]
                        kept[t, r, col] = masked(p, x, k, threshold)
                        grad[t, r, col] = fma(p, minus_delta, grad[t, r, col] * kept[t, r, col])

        _kernels = (numba, keep_times, softmax_grad)
    return _kernels


def fused_dropout_mask(enabled: Optional[bool] = None) -> bool:
    """Switch the PyTorch path's fused CPU dropout mask on or off (None leaves it as it is);
    returns whether it is now in use, i.e. switched on and numba importable. Off, the same mask
    runs as eager tensor passes (for debugging, and for benchmarks that compare the two)."""
    global ENABLED
    if enabled is not None:
        ENABLED = bool(enabled)
    return ENABLED and _build() is not None


def supports(x: Tensor) -> bool:
    """Whether the loops can take score blocks like ``x`` (numba present, CPU, fp32/fp64)."""
    return ENABLED and x.device.type == "cpu" and x.dtype in _DTYPES and _build() is not None


def hash_operands(row_steps: Tensor, group_steps: Tensor) -> Tuple[Tensor, Tensor]:
    """The loops' operands from ``dropout.first_mix_step`` of the row hashes (T, c, 1) and of the
    key groups j // 4 (T, 1, L / 4), int32 (``dropout.consecutive_words_``'s operands):
    (T, c) and (T, L / 4) int64 holding the uint32 values. Made once per attention call."""
    return (row_steps.reshape(row_steps.shape[0], -1).to(torch.int64) & MASK32,
            group_steps.reshape(group_steps.shape[0], -1).to(torch.int64) & MASK32)


def _launch(kernel, *arrays_and_scalars):
    numba = _kernels[0]
    torch_threads = torch.get_num_threads()
    threads = max(1, min(torch_threads, numba.config.NUMBA_NUM_THREADS))
    with _launch_lock:
        if numba.get_num_threads() != threads:
            numba.set_num_threads(threads)
        kernel(*(a.detach().numpy() if isinstance(a, Tensor) else a for a in arrays_and_scalars))
    # numba's OpenMP layer shares torch's libgomp and, when it starts its pool (the first
    # launch in a process), sets libgomp's count to NUMBA_NUM_THREADS: torch's own count
    # (a thread policy's, a benchmark's --threads) would silently change with it
    if torch.get_num_threads() != torch_threads:
        torch.set_num_threads(torch_threads)


def keep_times(src: Tensor, rows: Tensor, groups: Tensor, threshold: int, out: Optional[Tensor] = None) -> Tensor:
    """out <- src times the keep mask (1 kept, 0 dropped; the 1 / (1 - rate) scale is the
    caller's), in one pass; ``out`` may be ``src``, and is a new tensor when None.

    src, out: (T, c, L) contiguous, L a multiple of 4; rows (T, c), groups (T, L / 4): the
    ``hash_operands``."""
    out = torch.empty_like(src) if out is None else out
    _check(src, out, rows, groups)
    _launch(_kernels[1], src, out, rows, groups, int(threshold))
    return out


def softmax_grad_(probs: Tensor, grad: Tensor, kept: Tensor, rows: Tensor, groups: Tensor, threshold: int,
                  delta: Tensor) -> Tensor:
    """The softmax backward under dropout, in one pass: kept <- probs times the keep mask, and
    grad (dP of the kept probabilities) <- kept * grad - probs * delta, i.e. dS. Returns kept.

    probs, grad, kept: (T, c, L) contiguous; delta (T, c, 1) contiguous (rowsum of dO * O);
    rows, groups: the ``hash_operands``. The same operations, in the same order, as the eager
    ``kept = probs * keep; grad.mul_(kept).addcmul_(probs, delta, value=-1)``."""
    _check(probs, grad, rows, groups)
    assert kept.is_contiguous() and kept.shape == probs.shape and kept.dtype == probs.dtype
    assert delta.is_contiguous() and delta.shape == probs.shape[:2] + (1,) and delta.dtype == probs.dtype
    _launch(_kernels[2], probs, grad, kept, rows, groups, int(threshold), delta)
    return kept


def _check(src: Tensor, out: Tensor, rows: Tensor, groups: Tensor) -> None:
    windows, chunk, width = src.shape
    assert src.is_contiguous() and out.is_contiguous() and out.shape == src.shape and out.dtype == src.dtype
    assert width % KEYS_PER_WORD == 0
    assert rows.shape == (windows, chunk) and groups.shape == (windows, width // KEYS_PER_WORD)
    assert rows.dtype == groups.dtype == torch.int64 and rows.is_contiguous() and groups.is_contiguous()
