"""Large CPU buffers kept from one attention call for the next.

Why: torch's CPU allocator hands large blocks back to the operating system when they are freed
(glibc returns big chunks with munmap or trims them off the heap), so the next call of the same
shape touches fresh pages and pays a page fault per 4 KiB. The pool spares those page faults of
fresh large allocations to the attention-dropout hash words of the PyTorch path (N = 4,096, 12
heads: 28 MiB per layer, written by the forward and read by the backward) and their per-pass
buffers, and to the band pass's per-group buffers (``PassBuffers``): with threads a group's
scores are 32 MiB (``band_layout.GROUP_SCORES_THREADED``), above glibc's largest mmap
threshold, so without the pool each of them would be a fresh mapping on every call (the kernel's
page-fault counters tell the two apart). A GPU has its own caching allocator: buffers on other
devices pass straight through.

The pool holds at most ``POOL_BYTES``; a buffer is only ever handed to one caller at a time
(``take`` removes it, ``give`` returns it), so its contents are whatever the last user left.
"""
import threading
from typing import List, Tuple

import torch
from torch import Tensor

# What a training step of a 12-layer base model at N = 4,096, B = 1 frees and asks for again
# (12 layers x 28 MiB of hash words), with room to spare; larger shapes fall through to torch.
POOL_BYTES = 1 << 30


class BufferPool:
    """Free CPU buffers by (shape, dtype), the most recently returned first."""

    def __init__(self, capacity_bytes: int = POOL_BYTES):
        self.capacity_bytes = capacity_bytes
        self._free: List[Tensor] = []
        self._lock = threading.Lock()

    def take(self, shape: Tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        """An uninitialised tensor of ``shape`` and ``dtype``: a pooled one when there is one."""
        shape = torch.Size(shape)
        if torch.device(device).type == "cpu":
            with self._lock:
                for index, buffer in enumerate(self._free):
                    if buffer.shape == shape and buffer.dtype == dtype:
                        return self._free.pop(index)
        return torch.empty(shape, dtype=dtype, device=device)

    def give(self, buffer: Tensor) -> None:
        """Return a buffer from ``take``; the caller must not use it afterwards. Oldest buffers
        are dropped (freed) when the pool would exceed its capacity."""
        if buffer.device.type != "cpu" or buffer.nbytes > self.capacity_bytes:
            return
        with self._lock:
            kept, total = [buffer], buffer.nbytes
            for other in self._free:
                if total + other.nbytes <= self.capacity_bytes:
                    kept.append(other)
                    total += other.nbytes
            self._free = kept

    def held_bytes(self) -> int:
        with self._lock:
            return sum(buffer.nbytes for buffer in self._free)

    def clear(self) -> None:
        with self._lock:
            self._free = []


POOL = BufferPool()


def _poolable(like: Tensor) -> bool:
    """Whether buffers for a pass over ``like`` may come from the pool: plain CPU tensors only.
    While torch.compile traces, tensors are fake or functional subclasses (and dynamo cannot
    trace the pool's lock): a pooled real buffer would enter the graph as a constant."""
    return type(like) is torch.Tensor and like.device.type == "cpu" and not torch.compiler.is_compiling()


class PassBuffers:
    """The buffers of one pass, all given back to the pool when the pass ends, however it ends
    (an exception inside the pass included)::

        with PassBuffers(like) as buffers:
            scores = buffers.take((group, c, L))

    ``take`` hands out an uninitialised buffer with ``like``'s dtype and device: from the pool
    for plain CPU tensors, fresh otherwise. No buffer may be used after the ``with`` block."""

    def __init__(self, like: Tensor):
        self.like = like
        self._taken: List[Tensor] = []

    def take(self, shape: Tuple[int, ...]) -> Tensor:
        if _poolable(self.like):
            buffer = POOL.take(shape, self.like.dtype, self.like.device)
            self._taken.append(buffer)
            return buffer
        return self.like.new_empty(shape)

    def __enter__(self) -> "PassBuffers":
        return self

    def __exit__(self, *exc_info) -> bool:
        taken, self._taken = self._taken, []
        for buffer in taken:
            POOL.give(buffer)
        return False  # an exception goes on
