"""Attention dropout whose keep mask is a pure function of (seed, b, h, i, j).

Every implementation (reference, PyTorch path, Triton kernel, the module's global rows) draws
the same mask from this definition, so with the same seed they agree exactly with dropout on,
as they do with it off; and a backward pass recomputes the mask instead of storing it
(O(1) memory, as FlashAttention does with its Philox offsets).

The hash. With ``mix`` the 32-bit "lowbias32" finaliser (Wellons: x ^= x >> 16; x *= 0x7feb352d;
x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16, all modulo 2^32, a bijection with full avalanche):

    row(seed, b, h, i) = mix(mix(mix(seed ^ b) ^ h) ^ i)         one per query row
    bits(seed, b, h, i, j) = mix(row ^ j) >> 8                   24 uniform bits per entry
    keep  <=>  bits >= threshold,  threshold = round(p * 2^24)

b is the batch row, h the head, i the query position and j the key position, both in the
sequence's own coordinates (not a kernel's tiling), so the mask does not depend on how an
implementation walks the band. Kept probabilities are scaled by 1 / (1 - p).

Here the hash runs on int32 tensors holding the 32-bit patterns: int32 multiplication wraps
modulo 2^32 (two's complement, as the uint32 product), and right shifts are made logical by
masking off the copied sign bits. torch has no uint32 shift on CPU, and int64 with split
products was measured 3x slower. The Triton kernel computes the same function in uint32
arithmetic; tests check both against plain Python integers.
"""
from dataclasses import dataclass

import torch
from torch import Tensor

MASK32 = 0xFFFFFFFF
MIX_MUL_1 = 0x7FEB352D
MIX_MUL_2 = 0x846CA68B
KEEP_BITS = 24  # bits compared with the threshold: 2^24 levels of p


@dataclass(frozen=True)
class AttentionDropout:
    """Dropout of attention probabilities with rate ``p`` and mask seed ``seed`` (0 <= seed < 2^31).

    A training step draws a fresh seed per layer (``LongformerSelfAttention`` does, from torch's
    CPU generator); pass None instead of an AttentionDropout in eval mode or when p == 0.
    """

    p: float
    seed: int

    def __post_init__(self):
        if not 0.0 <= self.p < 1.0:
            raise ValueError(f"attention dropout p must be in [0, 1), got {self.p!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2 ** 31:
            raise ValueError(f"attention dropout seed must be an int in [0, 2^31), got {self.seed!r}")

    @property
    def threshold(self) -> int:
        """An entry is kept when its 24 hash bits are >= this."""
        return round(self.p * (1 << KEEP_BITS))

    @property
    def keep_scale(self) -> float:
        """Kept probabilities are multiplied by this, 1 / (1 - p)."""
        return 1.0 / (1.0 - self.p)


def _as_int32(constant: int) -> int:
    """The int32 with the bit pattern of a uint32 constant."""
    return constant - (1 << 32) if constant >= 1 << 31 else constant


def _shift_right(x: Tensor, bits: int) -> Tensor:
    """Logical right shift of int32 bit patterns."""
    return (x >> bits) & ((1 << (32 - bits)) - 1)


def mix32(x: Tensor) -> Tensor:
    """The lowbias32 finaliser on int32 tensors (bit patterns of uint32 values)."""
    x = x ^ _shift_right(x, 16)
    x = x * _as_int32(MIX_MUL_1)
    x = x ^ _shift_right(x, 15)
    x = x * _as_int32(MIX_MUL_2)
    return x ^ _shift_right(x, 16)


def row_hash(seed: int, b: Tensor, h: Tensor, i: Tensor) -> Tensor:
    """The per-query-row part of the hash; b, h, i broadcast. Returns int32 bit patterns."""
    return mix32(mix32(mix32(b.int() ^ seed) ^ h.int()) ^ i.int())


def keep_from_rows(rows: Tensor, j: Tensor, dropout: AttentionDropout) -> Tensor:
    """bool keep mask from row hashes and key positions j (broadcast against each other)."""
    return _shift_right(mix32(rows ^ j.int()), 32 - KEEP_BITS) >= dropout.threshold


def keep_mask(dropout: AttentionDropout, b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
    """bool keep mask of entries (b, h, i, j), all broadcast against each other."""
    return keep_from_rows(row_hash(dropout.seed, b, h, i), j, dropout)


def keep_matrix(dropout: AttentionDropout, batch: int, heads: int, length: int,
                device: torch.device = None) -> Tensor:
    """The whole (B, H, N, N) keep mask: for the reference and for tests (quadratic memory)."""
    ar = lambda n: torch.arange(n, device=device)  # noqa: E731
    rows = row_hash(dropout.seed, ar(batch)[:, None, None], ar(heads)[None, :, None], ar(length)[None, None, :])
    return keep_from_rows(rows[..., None], ar(length), dropout)


def global_rows_keep(dropout: AttentionDropout, global_index: Tensor, heads: int, length: int) -> Tensor:
    """(B, H, G, N) bool keep mask of the global queries at positions global_index (B, G)
    against every key position."""
    device = global_index.device
    batch = torch.arange(global_index.shape[0], device=device)[:, None, None]
    head = torch.arange(heads, device=device)[None, :, None]
    rows = row_hash(dropout.seed, batch, head, global_index[:, None, :])
    return keep_from_rows(rows[..., None], torch.arange(length, device=device), dropout)
