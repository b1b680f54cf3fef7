"""Large CPU buffers kept from one attention call for the next.

Why: torch's CPU allocator hands large blocks back to the operating system when they are freed
(glibc returns big chunks with munmap or trims them off the heap), so the next call of the same
shape touches fresh pages and pays a page fault per 4 KiB. For the attention-dropout hash words
of the PyTorch path (N = 4,096, 12 heads: 28 MiB per layer, written by the forward and read by
the backward) and their per-pass buffers, that refaulting cost as much as a third of what
dropout added to a forward and backward on a 2-core machine (measured with the kernel's
counters: ~15,000 faults per backward with dropout, ~0 without). The band pass's per-group
buffers (``scratch``/``release``) come from here too: with threads a group's scores are 32 MiB
(``band_layout.GROUP_SCORES_THREADED``), above glibc's largest mmap threshold, so each of the
four per call was a fresh mapping (~24,000 faults per forward and backward at N = 4,096, 0 with
the pool; 7% less CPU time for the layer, measured side by side). A GPU has its own caching
allocator: buffers on other devices pass straight through.

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


def scratch(like: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """An uninitialised buffer of ``shape`` with ``like``'s dtype and device for one pass, given
    back with ``release``: from the pool for plain CPU tensors, fresh otherwise."""
    if _poolable(like):
        return POOL.take(shape, like.dtype, like.device)
    return like.new_empty(shape)


def release(*buffers: Tensor) -> None:
    """Give ``scratch`` buffers back; the caller must not use them afterwards."""
    for buffer in buffers:
        if buffer is not None and _poolable(buffer):
            POOL.give(buffer)
