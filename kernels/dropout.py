"""Attention dropout whose keep mask is a pure function of (seed, b, h, i, j).

Every implementation (reference, PyTorch path, Triton kernel, the module's global rows) draws
the same mask from this definition, so with the same seed they agree exactly with dropout on,
as they do with it off; and a backward pass recomputes the mask instead of storing it
(O(1) memory, as FlashAttention does with its Philox offsets).

The hash. With ``mix`` the 32-bit "lowbias32" finaliser (Wellons: x ^= x >> 16; x *= 0x7feb352d;
x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16, all modulo 2^32, a bijection with full avalanche):

    row(seed, b, h, i)     = mix(mix(mix(seed ^ b) ^ h) ^ i)       one per query row
    word(seed, b, h, i, g) = mix(row ^ g)                          one per 4 keys, g = j >> 2
    draw(seed, b, h, i, j) = byte (j & 3) of word, i.e. (word >> 8 * (j & 3)) & 0xFF
    keep  <=>  draw >= threshold,  threshold = round(p * 256)

b is the batch row, h the head, i the query position and j the key position, both in the
sequence's own coordinates (not a kernel's tiling), so the mask does not depend on how an
implementation walks the band. One 32-bit hash serves four consecutive keys with an 8-bit draw
each (as FlashAttention draws its dropout): the hash is most of the mask's cost, so this costs
about a quarter of one hash per entry. ``p`` is quantised to 1/256: the rate applied is
threshold / 256 (0.1 gives 26/256 = 0.1016), and kept probabilities are scaled by
1 / (1 - threshold / 256), so the output's expectation is exact for the rate applied. A p that
rounds to 0 or to 256 is refused rather than silently changed.

Here the hash runs on int32 tensors holding the 32-bit patterns: int32 multiplication wraps
modulo 2^32 (two's complement, as the uint32 product), and right shifts are made logical by
masking off the copied sign bits. torch has no uint32 shift on CPU, and int64 with split
products was measured 3x slower. The Triton kernel computes the same function in uint32
arithmetic; tests check both against plain Python integers.
"""
import sys
from dataclasses import dataclass

import torch
from torch import Tensor

MASK32 = 0xFFFFFFFF
MIX_MUL_1 = 0x7FEB352D
MIX_MUL_2 = 0x846CA68B
DRAW_BITS = 8  # bits of one draw: p is quantised to 1 / 2^8
KEYS_PER_WORD = 32 // DRAW_BITS  # consecutive keys sharing one 32-bit hash
LEVELS = 1 << DRAW_BITS


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
        if self.p > 0 and not 0 < self.threshold < LEVELS:
            raise ValueError(
                f"attention dropout p={self.p!r} is outside what the keep mask resolves (steps of "
                f"1/{LEVELS}): use 0, or a p between {0.5 / LEVELS:.4f} and {1 - 0.5 / LEVELS:.4f}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2 ** 31:
            raise ValueError(f"attention dropout seed must be an int in [0, 2^31), got {self.seed!r}")

    @property
    def threshold(self) -> int:
        """An entry is kept when its 8-bit draw is >= this."""
        return round(self.p * LEVELS)

    @property
    def rate(self) -> float:
        """The dropout rate applied: p rounded to a multiple of 1/256."""
        return self.threshold / LEVELS

    @property
    def keep_scale(self) -> float:
        """Kept probabilities are multiplied by this, 1 / (1 - rate)."""
        return LEVELS / (LEVELS - self.threshold)


def _as_int32(constant: int) -> int:
    """The int32 with the bit pattern of a uint32 constant."""
    return constant - (1 << 32) if constant >= 1 << 31 else constant


def mix32(x: Tensor) -> Tensor:
    """The lowbias32 finaliser on int32 tensors (bit patterns of uint32 values)."""
    return mix32_(x.clone())


def _xorshift_(x: Tensor, scratch: Tensor, bits: int) -> None:
    torch.bitwise_right_shift(x, bits, out=scratch)
    x.bitwise_xor_(scratch.bitwise_and_((1 << (32 - bits)) - 1))


def mix32_(x: Tensor) -> Tensor:
    """mix32 in place, with one scratch tensor: on CPU each fresh temporary of a large tensor
    costs more than the integer operation that fills it (measured 5x slower allocating)."""
    scratch = torch.empty_like(x)
    _xorshift_(x, scratch, 16)
    return _mix32_after_first_shift_(x, scratch)


def _mix32_after_first_shift_(x: Tensor, scratch: Tensor) -> Tensor:
    """Steps 2-5 of mix32, in place: x holds x0 ^ (x0 >>> 16) for the input x0."""
    x.mul_(_as_int32(MIX_MUL_1))
    _xorshift_(x, scratch, 15)
    x.mul_(_as_int32(MIX_MUL_2))
    _xorshift_(x, scratch, 16)
    return x


def row_hash(seed: int, b: Tensor, h: Tensor, i: Tensor) -> Tensor:
    """The per-query-row part of the hash; b, h, i broadcast. Returns int32 bit patterns."""
    return mix32_(mix32_(mix32_(b.int() ^ seed) ^ h.int()) ^ i.int())


def draws(rows: Tensor, j: Tensor) -> Tensor:
    """int32 8-bit draws of entries (row hash, key position j), broadcast against each other:
    byte j & 3 of mix(row ^ (j >> 2)). One hash per entry: for keys in any order."""
    j = j.int()
    words = mix32_(rows ^ (j >> 2))
    # an arithmetic shift is enough here: the copied sign bits land above the 8 kept
    return (words >> (j & (KEYS_PER_WORD - 1)) * DRAW_BITS) & (LEVELS - 1)


def keep_from_rows(rows: Tensor, j: Tensor, dropout: AttentionDropout) -> Tensor:
    """bool keep mask from row hashes and key positions j (broadcast against each other)."""
    return draws(rows, j) >= dropout.threshold


def first_mix_step(x: Tensor) -> Tensor:
    """mix32's first step, x ^ (x >>> 16), out of place. Logical shifts distribute over xor, so
    the step of row ^ group is first_mix_step(row) ^ first_mix_step(group): taken on the small
    per-row and per-group operands (``consecutive_words_``), it costs one pass over the words
    instead of four."""
    return x ^ ((x >> 16) & 0xFFFF)


def consecutive_words_(row_steps: Tensor, group_steps: Tensor, words: Tensor, scratch: Tensor) -> Tensor:
    """``words`` <- the hash words of rows against groups of 4 consecutive keys; returns it.

    row_steps (..., R, 1) = first_mix_step(row hashes) and group_steps (..., 1, G) =
    first_mix_step(key groups j // 4), int32, broadcast against words and scratch (..., R, G)
    int32 (both written): one hash per four keys."""
    return _mix32_after_first_shift_(torch.bitwise_xor(row_steps, group_steps, out=words), scratch)


def keep_from_words_(words: Tensor, out: Tensor, dropout: AttentionDropout) -> Tensor:
    """``out`` (..., R, 4 G) float <- the keep mask of hash words (..., R, G), 1.0 (kept) / 0.0
    (dropped); returns it. The words' bytes are read in place through a uint8 view (byte k of a
    little-endian int32 is bits 8k .. 8k + 7: draw k of the word) and compared straight into the
    float buffer: on CPU that one comparison took 70 us a group where a bool result took 340 and
    a float copy, subtraction and clamp 130 (measured). The 1 / (1 - rate) scale is left to the
    caller, which folds it into a smaller tensor."""
    assert sys.byteorder == "little", "the byte view needs a little-endian machine"
    return torch.ge(words.view(torch.uint8).view(out.shape), dropout.threshold, out=out)


def consecutive_multipliers(rows: Tensor, first_group: Tensor, groups: int, dropout: AttentionDropout,
                            dtype: torch.dtype) -> Tensor:
    """Dropout multipliers (0 or keep_scale) of rows against KEYS_PER_WORD * ``groups``
    consecutive keys starting at key 4 * first_group (``consecutive_words_``, ``keep_from_words_``):
    rows (..., R, 1), first_group (..., 1, 1) int32 -> (..., R, 4 * groups) in ``dtype``."""
    shape = torch.broadcast_shapes(rows.shape, first_group.shape)[:-1] + (groups,)
    words = torch.empty(shape, dtype=torch.int32, device=rows.device)
    out = torch.empty(shape[:-1] + (groups * KEYS_PER_WORD,), dtype=dtype, device=rows.device)
    group_steps = first_mix_step(first_group + torch.arange(groups, dtype=torch.int32, device=rows.device))
    consecutive_words_(first_mix_step(rows), group_steps, words, torch.empty_like(words))
    return keep_from_words_(words, out, dropout).mul_(dropout.keep_scale)


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
