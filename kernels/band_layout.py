"""Where the vectorized PyTorch path (``sliding_chunks.py``) puts things: the chunked query and
strided key-window layout of the band, the attention-dropout keep masks in that layout, and how
its masked scores are written (-inf) and exponentiated (``exp_and_lse``, which guards rows with
no allowed key).

Shapes: S = B * H slices of M positions; c positions per query chunk, nb chunks per slice,
L = R * c keys per window (see ``BandLayout``).
"""
import sys
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import fused_keep
from .buffer_pool import POOL
from .dropout import (KEYS_PER_WORD, AttentionDropout, consecutive_words_, first_mix_step, keep_from_rows,
                      keep_from_words_, row_hash)

# In the small global-query scores, masked scores get the finite MASKED_SCORE (pattern.py).
# In the band, masked scores are -inf instead: exp(-1e30 - m) goes through the CPU's slow
# denormal path (about 2x slower per element than exp(-inf), measured), and the band is where
# nearly all elements are. Rows with no allowed key are guarded explicitly (exp_and_lse).
BAND_MASKED = float("-inf")
# Score elements per group of windows: 2 MiB of fp32, so that a group's scores, probabilities
# and their gradients stay in cache between the steps that use them. Measured on CPU (N = 4096,
# 12 heads, w = 256): 2^17-2^18 fastest with 1 thread, 2^19-2^20 with 2 (fewer, larger
# parallel regions); 2^22 was 1.3-1.5x slower than the best.
GROUP_SCORES = 1 << 19
# With more than one torch thread every step of a group is a parallel region that ends when its
# slowest thread does: on a shared machine a descheduled thread makes each region wait (the
# profile of a 1-layer LED encoder at N = 4,096, w = 512 under load showed every step of the
# loop costing alike, whatever its work), and the band loop has a handful of regions per group
# where the stock model has a few large matmuls. So with threads the groups are larger: 16x
# fewer regions. Measured side by side in one process (LED encoder, N = 4,096, w = 512, load
# 8-10 on 2 cores): the median fell below the stock model's, and below 2^19's for the Longformer
# (w = 256, N = 4,096) forward and forward + backward too, while the 1-thread times of 2^19 and
# 2^23 stayed within each other's noise. ``group_budget`` picks between them.
GROUP_SCORES_THREADED = 1 << 23
# On a GPU the groups are far larger: there each group costs a dozen kernel launches, and the
# cache argument does not apply (a size chosen for launch overhead, not measured here).
GROUP_SCORES_GPU = 1 << 24


def _chunk_size(window: int, length: int) -> int:
    # c = w/4 keeps the wasted (out-of-band) share of each key window at 1.125x the band while
    # the batched matmuls stay large enough to be efficient (on CPU at w = 256, D = 64, c = 64
    # beat 128 and 256 in every matmul of forward and backward).
    return max(1, min(length, max(window // 4, 32)))


def group_budget(device: torch.device) -> int:
    """Score elements per group of windows on ``device`` (see GROUP_SCORES*): read per call,
    so that a caller's ``torch.set_num_threads`` counts."""
    if device.type != "cpu":
        return GROUP_SCORES_GPU
    if torch.compiler.is_compiling():
        # torch.get_num_threads() returns a host int that dynamo cannot put in the graph (a
        # graph break inside the attention's autograd.Function): compiled graphs take the
        # threaded size (outputs do not depend on the group size)
        return GROUP_SCORES_THREADED
    return GROUP_SCORES if torch.get_num_threads() == 1 else GROUP_SCORES_THREADED


def exp_and_lse(scores: Tensor, lse: Tensor) -> Tensor:
    """In place: base-2 scores (T, c, L) -> exp2(scores - rowmax), the unnormalised softmax;
    lse (T, c, 1) <- each row's base-2 log-sum-exp. Returns the row sums (T, c, 1), by which
    the caller divides the (T, c, D) output rather than the (T, c, L) probabilities.

    A row whose keys are all masked has max -inf: the max is clamped to the lowest float so the
    row becomes exp(-inf) = 0 instead of NaN, and its sum is clamped away from 0, which leaves
    an output of 0 and an lse near -3.4e38 (finite, so recomputation in backward and the merge
    with global keys are NaN-free too).
    """
    top = scores.amax(dim=-1, keepdim=True).clamp_(min=torch.finfo(scores.dtype).min)
    total = scores.sub_(top).exp2_().sum(dim=-1, keepdim=True).clamp_(min=torch.finfo(scores.dtype).tiny)
    torch.add(top, torch.log2(total), out=lse)
    return total


class BandLayout:
    """Where every query chunk and key window of the band lives, for S = B * H slices of M
    positions.

    Queries: (S * nb, c, D) chunks. Keys and values: one flat buffer of (S * nb + R - 1) * c
    rows holding key p of slice s at row ``before + s * nb * c + p`` (zeros elsewhere), so the
    window of chunk j of slice s is rows [t * c, t * c + L) with t = s * nb + j, and one
    as_strided view covers all windows. A window's first and last keys may belong to a
    neighbouring slice or to padding: the bias masks them.
    """

    def __init__(self, batch: int, heads: int, length: int, head_dim: int, window: int, causal: bool,
                 device: torch.device):
        self.batch, self.heads, self.length, self.head_dim = batch, heads, length, head_dim
        self.slices = batch * heads
        # |i - j| <= M - 1 always: a wider window changes nothing and would only cost time
        self.window = window = min(window, max(length - 1, 0))
        self.chunk = c = _chunk_size(window, length)
        self.num_chunks = -(-length // c)
        self.padded = self.num_chunks * c
        self.span = window if causal else 2 * window  # query r of a chunk sees keys r <= u <= r + span
        self.blocks = 1 + -(-self.span // c)  # R = L / c
        self.width = self.blocks * c  # L, keys per window
        self.windows = self.slices * self.num_chunks
        self.before = window  # key p of the chunk starting at position s is window column p - s + w
        self.rows = (self.windows + self.blocks - 1) * c
        self.group = max(1, group_budget(device) // (c * self.width))

    def queries(self, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
        """(B, H, M, D) -> (S * nb, c, D), zero padded, into ``out`` (S * nb, c, D) if given."""
        if out is None:
            out = x.new_empty(self.batch, self.heads, self.padded, self.head_dim)
        out = out.view(self.batch, self.heads, self.padded, self.head_dim)
        out[:, :, :self.length] = x
        out[:, :, self.length:] = 0
        return out.view(self.windows, self.chunk, self.head_dim)

    def unqueries(self, x: Tensor) -> Tensor:
        """(S * nb, c, ...) -> (B, H, M, ...) view."""
        return x.view(self.batch, self.heads, self.padded, *x.shape[2:])[:, :, :self.length]

    def keys(self, x: Tensor) -> Tensor:
        """(B, H, M, D) -> the flat (rows, D) key buffer."""
        flat = x.new_empty(self.rows, self.head_dim)
        start, end = self.before, self.before + self.slices * self.padded
        flat[:start] = 0
        flat[end:] = 0
        flat[start:end].view(self.slices, self.padded, self.head_dim)[:, self.length:] = 0
        self.unkeys(flat).copy_(x)
        return flat

    def unkeys(self, flat: Tensor) -> Tensor:
        """The flat (rows, D) key buffer -> its (B, H, M, D) view."""
        inner = flat[self.before:self.before + self.slices * self.padded]
        return inner.view(self.batch, self.heads, self.padded, self.head_dim)[:, :, :self.length]

    def key_windows(self, flat: Tensor) -> Tensor:
        """(S * nb, L, D) overlapping view of the flat key buffer."""
        d = self.head_dim
        return flat.as_strided((self.windows, self.width, d), (self.chunk * d, d, 1))

    def global_rows(self, global_keys: Tensor) -> Tensor:
        """(B, H, G) indices into the flattened (B * H * M) keys -> (S, G) rows of the flat buffer."""
        slices, positions = global_keys // self.length, global_keys % self.length
        return (self.before + slices * self.padded + positions).reshape(self.slices, -1)

    def bias(self, key_valid: Tensor, dtype) -> Tuple[Tensor, Tensor]:
        """Additive (0 / -inf) biases: (c, L) for the band shape, shared by all windows, and
        (S * nb, 1, L) for keys outside the sequence or not valid (padding, global)."""
        c, width, device = self.chunk, self.width, key_valid.device
        offset = torch.arange(width, device=device) - torch.arange(c, device=device)[:, None]
        band = torch.zeros(c, width, dtype=dtype, device=device)
        band.masked_fill_((offset < 0) | (offset > self.span), BAND_MASKED)
        valid = key_valid.expand(self.batch, self.heads, self.length).reshape(self.slices, self.length)
        right = self.padded - self.length + width - c - self.before
        valid = F.pad(valid, (self.before, right), value=False)  # positions -w .. padded + L - c - w
        valid = valid.unfold(1, width, c)  # (S, nb, L)
        keys = torch.zeros(valid.shape, dtype=dtype, device=device).masked_fill_(~valid, BAND_MASKED)
        return band, keys.view(self.windows, 1, width)

    def scores_bias(self, band: Tensor, key_bias: Tensor, band_bias: Tensor) -> Tensor:
        """The additive score bias of every window, (S * nb, c, L), base-2 units: ``band`` +
        ``key_bias`` (0 / -inf) plus ``band_bias`` moved into the window layout.

        band_bias: (B, H, M, span + 1), already in base-2 units, column o the key at window
        column u = r + o of query r of a chunk (the band's offsets, see ``span``). Where the
        0 / -inf part is -inf the band bias is dropped, so its value there never matters.
        """
        c, width, span = self.chunk, self.width, self.span
        # Row r of a chunk needs its span + 1 values at columns r .. r + span: the "skew" of
        # Transformer-XL. Rows of width L + 1 (zero beyond span) read with a row stride of L
        # put value o of row r at r * L + r + o, i.e. at column r + o; r + o < L since
        # L >= c + span, and the columns of row r outside r .. r + span read zeros.
        rows = band_bias.new_zeros(self.batch, self.heads, self.padded, width + 1)
        rows[:, :, :self.length, :span + 1] = band_bias
        skewed = rows.as_strided((self.windows, c, width), (c * (width + 1), width, 1))
        base = band + key_bias
        return torch.where(torch.isinf(base), base, base + skewed)

    def unskew(self, grad_scores: Tensor, out: Tensor) -> None:
        """Inverse of the skew of ``scores_bias`` for T contiguous (T, c, L) windows: out
        (T, c, span + 1) <- grad_scores[t, r, r + o] (row stride L + 1 reads the diagonal)."""
        count, c, width = grad_scores.shape
        assert grad_scores.is_contiguous()
        diagonal = grad_scores.as_strided((count, c, self.span + 1), (c * width, width + 1, 1))
        out.copy_(diagonal)

    def first_keys(self, t: Tensor) -> Tensor:
        """The index, within its slice, of key column 0 of each window t: key column u of window
        t (chunk j of slice s) is index j * c + u - before of slice s. Indices outside the slice
        are masked by the band's bias, so any value (a hash of them) does there."""
        return (t % self.num_chunks) * self.chunk - self.before

    def groups(self):
        """(start, end) ranges of windows processed together."""
        for start in range(0, self.windows, self.group):
            yield start, min(start + self.group, self.windows)


class BandDropout:
    """The attention-dropout keep masks (``dropout.py``) of one band call: 0 / 1 multipliers of
    its score blocks (``band``; the 1 / (1 - rate) scale is the caller's, folded into smaller
    tensors), and 0 / keep_scale multipliers of the global keys (``global_keys``).

    The band call sees S = B * H' slices of M positions; for dilation d each head is d residue
    slices (slice s = b * H' + h' with h' = head_in_group * d + r, position of index m =
    m * d + r). The mask is a function of the original (b, head, position), so this maps back.
    heads: (H_group,) long, the original head of each head of the group; global_positions:
    (B, G) long or None.

    Where the keys of a window are whole groups of 4 consecutive positions (undilated), one hash
    word serves 4 keys. With numba on CPU (``fused_keep``) each pass, forward and backward, then
    hashes, compares and multiplies in one native loop and nothing is kept between them.
    Otherwise the forward hashes every window once in eager passes and keeps the hash words,
    (S * nb, c, L / 4) int32, one byte per band score, until the backward, which then only
    compares them: on CPU the hash was a third of what dropout cost a forward and backward
    (N = 4,096, w = 256), and the words take a quarter of the memory of the (S * nb, c, L) fp32
    score blocks that storing the mask as multipliers would. The dilated (per-entry) path
    recomputes its mask. The words and the per-pass buffers come from, and go back to,
    ``buffer_pool.POOL``.
    """

    def __init__(self, dropout: AttentionDropout, layout: "BandLayout", heads: Tensor, dilation: int,
                 global_positions: Optional[Tensor]):
        device = heads.device
        per_batch = layout.heads  # H' = H_group * d
        s = torch.arange(layout.slices, device=device)
        self.batch_of_slice = s // per_batch
        self.residue = s % dilation
        head = heads[(s % per_batch) // dilation]
        self.dropout, self.layout, self.dilation = dropout, layout, dilation
        m = torch.arange(layout.padded, device=device)
        rows = row_hash(dropout.seed, self.batch_of_slice[:, None], head[:, None],
                        m[None, :] * dilation + self.residue[:, None])  # (S, padded)
        self.rows = rows.view(layout.windows, layout.chunk, 1)
        # Undilated windows whose first key and width are multiples of 4 take one hash per 4
        # keys (``consecutive_words_``); others one per key (the same mask, slower).
        self.consecutive = (dilation == 1 and layout.chunk % KEYS_PER_WORD == 0
                            and layout.before % KEYS_PER_WORD == 0 and layout.width % KEYS_PER_WORD == 0
                            and sys.byteorder == "little")
        self.global_positions = global_positions
        self._buffers = {}
        self._fused_operands = None
        self.words = None  # the consecutive path's hash words, drawn by the forward
        self.drawn = False
        if self.consecutive:
            # the hash's first step on its small operands, once per call (forward and backward
            # reuse them): each row, and each window's key groups (windows, 1, L / 4)
            self.row_steps = first_mix_step(self.rows)
            first = layout.first_keys(torch.arange(layout.windows, device=device))
            groups = first[:, None] // KEYS_PER_WORD + torch.arange(layout.width // KEYS_PER_WORD, device=device)
            self.group_steps = first_mix_step(groups.int()).unsqueeze(1)

    def keep_times(self, start: int, end: int, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
        """x (end - start, c, L) times the 0 / 1 keep mask of windows start .. end - 1, into
        ``out`` (which may be x) or, when None, into a buffer of this object's that the next
        call overwrites."""
        if self._fused(x):
            if out is None:
                out = self._buffer("keep", x.dtype)[:end - start]
            rows, groups = self._fused_operands
            return fused_keep.keep_times(x, rows[start:end], groups[start:end], self.dropout.threshold, out=out)
        keep = self.band(start, end, x.dtype)
        return torch.mul(x, keep, out=keep if out is None else out)

    def softmax_grad_(self, start: int, end: int, probs: Tensor, grad: Tensor, delta: Tensor) -> Tensor:
        """The softmax backward of windows start .. end - 1 under dropout: grad (dP of the kept
        probabilities, (end - start, c, L)) <- dS = kept * dP - probs * delta, with delta
        (end - start, c, 1) the rowsum of dO * O. Returns kept = probs * keep (in a buffer of
        this object's), what dV needs."""
        if self._fused(probs):
            rows, groups = self._fused_operands
            kept = self._buffer("keep", probs.dtype)[:end - start]
            return fused_keep.softmax_grad_(probs, grad, kept, rows[start:end], groups[start:end],
                                            self.dropout.threshold, delta)
        kept = self.keep_times(start, end, probs)
        grad.mul_(kept).addcmul_(probs, delta, value=-1.0)  # one pass fewer than P * (keep * dP - delta)
        return kept

    def _fused(self, x: Tensor) -> bool:
        """Whether this call's mask runs in ``fused_keep``'s loops, for score blocks like x."""
        if not (self.consecutive and fused_keep.supports(x)):
            return False
        if self._fused_operands is None:
            self._fused_operands = fused_keep.hash_operands(self.row_steps, self.group_steps)
        return True

    def band(self, start: int, end: int, dtype) -> Tensor:
        """(end - start, c, L) 0 / 1 keep mask of windows start .. end - 1, in ``dtype``: a view
        of a buffer of this object's, overwritten by the next call (the caller may write it)."""
        if self.consecutive:  # a window's keys are whole groups of 4 consecutive positions
            scratch, keep = self._buffer("scratch", torch.int32), self._buffer("keep", dtype)
            count = end - start
            if self.words is None:
                lay = self.layout
                self.words = POOL.take((lay.windows, lay.chunk, lay.width // KEYS_PER_WORD), torch.int32,
                                       self.rows.device)
            words = self.words[start:end]
            if not self.drawn:
                consecutive_words_(self.row_steps[start:end], self.group_steps[start:end], words, scratch[:count])
            return keep_from_words_(words, keep[:count], self.dropout)
        lay = self.layout
        t = torch.arange(start, end, device=self.rows.device)
        index = lay.first_keys(t)[:, None] + torch.arange(lay.width, device=t.device)
        slices = t // lay.num_chunks
        positions = index.clamp_(min=0) * self.dilation + self.residue[slices][:, None]
        return keep_from_rows(self.rows[start:end], positions[:, None, :], self.dropout).to(dtype)

    def _buffer(self, role: str, dtype) -> Tensor:
        """This pass's (group, c, L) keep-mask buffer (role "keep") or the hash's int32 scratch
        (group, c, L / 4) ("scratch"): taken once per pass, not per group of windows (a fresh
        large tensor costs page faults on CPU)."""
        lay = self.layout
        buffer = self._buffers.get(role)
        if buffer is None or buffer.dtype != dtype:
            if buffer is not None:
                POOL.give(buffer)
            width = lay.width // KEYS_PER_WORD if role == "scratch" else lay.width
            buffer = self._buffers[role] = POOL.take((lay.group, lay.chunk, width), dtype, self.rows.device)
        return buffer

    def _give_buffers(self) -> None:
        for buffer in self._buffers.values():
            POOL.give(buffer)
        self._buffers = {}

    def end_pass(self) -> None:
        """After a pass over every window: the group buffers go back to the pool (the object
        lives from forward to backward, they need not); the hash words drawn stay for the
        backward."""
        self._give_buffers()
        self.drawn = self.words is not None

    def release(self) -> None:
        """After the backward: the hash words go back to the pool. A second backward (with
        retain_graph) draws them again."""
        if self.words is not None:
            POOL.give(self.words)
        self.words, self.drawn = None, False

    def global_keys(self, dtype) -> Tensor:
        """(S, M', G) multipliers, 0 or keep_scale, of every query against its slice's global keys."""
        rows = self.rows.view(self.layout.slices, -1, 1)
        keys = self.global_positions[self.batch_of_slice][:, None, :]  # (S, 1, G)
        return keep_from_rows(rows, keys, self.dropout).to(dtype).mul_(self.dropout.keep_scale)


@contextmanager
def dropout_pass(drop: Optional[BandDropout], last: bool) -> Iterator[None]:
    """One pass of the band over every window under ``drop``'s masks (None: no dropout): its
    group buffers go back to the pool when the pass ends, however it ends, and its hash words
    too when this is the last pass (``last``: the backward) or the pass raised (no backward
    will read them)."""
    if drop is None:
        yield
        return
    failed = True
    try:
        yield
        failed = False
    finally:
        drop.end_pass()
        if last or failed:
            drop.release()
