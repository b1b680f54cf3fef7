"""Useful floating-point operations of Longformer attention and of whole models: the one count
every benchmark of the project uses, CPU (``longformer-bench``, ``tools/bench``, ``train-steps``)
and GPU (``longformer_tools.gpu.gpu_bench``, the H200 pages).

The convention, stated once (docs/benchmarks.md quotes it):

  Useful FLOPs are what the pattern needs, whatever an implementation computes on the way (dense
  SDPA scores all N x N pairs, the PyTorch path c x L per chunk, a Triton tile its whole block):
  a multiply-add counts 2.

  pairs        every attended (query i, key j): the band |i - j| <= w inside 0 <= i, j < N, plus
               the rows and columns of the G global tokens (the benchmarks put them at the first
               G positions), each pair once (``attended_pairs``). A pair costs 4*D per head: 2*D
               for q.k and 2*D for p.v.
  projections  (a whole layer, ``layer_flops``) q, k, v over all N rows: 3 * 2*B*N*C*C; with G > 0
               also k_g, v_g over all N rows and q_g over the G global rows; with the output
               projection 2*B*N*C*C more.
  backward     twice the forward: two matmuls per forward matmul (dq and dk from dS, dv and dP
               from dO), so forward+backward is 3x the forward (``FORWARD_BACKWARD``). A
               recomputation of the scores in the backward (FlashAttention's, our Triton kernel's,
               the PyTorch path's) is not useful work and is not counted; FlashAttention's own
               benchmarks count it (2.5x, fwd+bwd 3.5x), so their TFLOP/s read 7/6 of ours for the
               same time.

  models       (``longformer-bench train-steps``: ``layer_forward_flops``, ``step_flops``) every token
               through q, k, v, output projection and the feed-forward pair: 2*N*(4*C*C + 2*C*F)
               per layer, with G > 0 global tokens also k_g, v_g over all N rows and q_g over the
               G global rows; 4*D per attended pair and head, each head at its dilation d (query
               i attends i + d*k, |k| <= w, inside the sequence; causal: k <= 0) plus the global
               rows and columns (dilation 1); a dense model attends all N*N pairs. The masked
               LM's head counts over the M masked positions only (2*M*(C*C + C*V)). Embeddings,
               layer norms, activations and the softmax are not counted.

Shapes: B batch, N length, H heads, D head dim, C = H*D, F feed-forward width, V vocabulary, w
one-sided window (dilation 1, not causal, unless said), G global tokens. Pure arithmetic, standard
library only, so the GPU tooling imports it on a bare image: tests/kernels/test_flops.py and
tests/tools/bench/test_train_steps.py check the counts by brute force.
"""
from dataclasses import dataclass
from typing import Iterable, Tuple

FORWARD_BACKWARD = 3  # forward + backward = 3x the forward's useful FLOPs (backward = 2x)


def band_pairs(length: int, window: int) -> int:
    """Pairs (i, j), 0 <= i, j < N, with |i - j| <= w. Each of the N rows has 2w + 1 keys but the
    first and last w rows lose 1, 2, .., w at the sequence ends: N*(2w + 1) - w*(w + 1), with w
    at most N - 1 (a wider window sees nothing more)."""
    window = min(window, max(length - 1, 0))
    return length * (2 * window + 1) - window * (window + 1)


def band_row_pairs(row: int, length: int, window: int) -> int:
    """Keys of row i in the band: positions max(0, i - w) .. min(N - 1, i + w)."""
    return min(row + window, length - 1) - max(row - window, 0) + 1


def attended_pairs(length: int, window: int, global_tokens: int = 0) -> int:
    """Pairs (i, j) some query attends: the band, plus every pair in a global row or column (the
    first G positions), each pair once. The global rows and columns hold 2*G*N - G*G pairs;
    those of them that lie in the band are already in it: G band rows, G band columns, less the
    G x G corner counted in both."""
    glob = min(global_tokens, length)
    in_global_rows = sum(band_row_pairs(i, length, window) for i in range(glob))
    overlap = 2 * in_global_rows - band_pairs(glob, window)
    return band_pairs(length, window) + 2 * glob * length - glob * glob - overlap


def attention_flops(batch: int, heads: int, length: int, head_dim: int, window: int, global_tokens: int = 0,
                    backward: bool = False) -> int:
    """Useful FLOPs of the attention core (q, k, v: (B, H, N, D) in, (B, H, N, D) out; no
    projections): 4*D per attended pair and head, times ``FORWARD_BACKWARD`` with ``backward``."""
    forward = 4 * head_dim * heads * batch * attended_pairs(length, window, global_tokens)
    return forward * (FORWARD_BACKWARD if backward else 1)


@dataclass(frozen=True)
class LayerFlops:
    """Useful FLOPs of one forward call of a whole attention layer: ``projections`` (every Linear
    of the layer) and ``pairs`` (q.k and p.v of every attended pair, half each)."""

    projections: int
    pairs: int

    @property
    def forward(self) -> int:
        return self.projections + self.pairs

    @property
    def forward_backward(self) -> int:
        return FORWARD_BACKWARD * self.forward


def layer_flops(batch: int, length: int, heads: int, head_dim: int, window: int, global_tokens: int,
                output_projection: bool = False) -> LayerFlops:
    """The useful FLOPs of one call of the layer, from the hidden states (B, N, C) through the
    projections to the heads' output (see the module docstring)."""
    hidden = heads * head_dim
    glob = min(global_tokens, length)
    rows = 3 * length  # q, k, v: C x C per row each
    if glob:
        rows += 2 * length + glob  # k_g, v_g over every row, q_g over the global rows
    if output_projection:
        rows += length
    return LayerFlops(projections=2 * batch * rows * hidden * hidden,
                      pairs=attention_flops(batch, heads, length, head_dim, window, glob))


def _clipped_steps(length: int, window: int, dilation: int) -> int:
    """sum over i in [0, N) of min(w, i // d): the keys row i has on one side, past itself."""
    full = min(length, dilation * window)  # rows before this see fewer than w keys back
    q, r = divmod(full, dilation)
    below = dilation * q * (q - 1) // 2 + r * q  # sum of i // d for i < full
    return below + (length - full) * window


def dilated_pairs(length: int, window: int, dilation: int = 1, causal: bool = False) -> int:
    """(query, key) pairs of one head: each row itself, plus up to w keys d apart on each side
    (only before it when ``causal``), inside [0, N)."""
    side = _clipped_steps(length, window, dilation)
    return length + side * (1 if causal else 2)


def layer_forward_flops(length: int, hidden: int, ffn: int, heads: int, pairs_per_head: Iterable[int],
                        global_tokens: int = 0) -> int:
    """Forward FLOPs of one transformer layer whose H heads attend ``pairs_per_head`` pairs."""
    projections = 2 * length * (4 * hidden * hidden + 2 * hidden * ffn)
    if global_tokens:
        projections += 2 * 2 * length * hidden * hidden + 2 * global_tokens * hidden * hidden
    return projections + 4 * (hidden // heads) * sum(pairs_per_head)


def longformer_pairs(length: int, window: int, dilations: Tuple[int, ...], causal: bool,
                     global_tokens: int = 0) -> list:
    """Pairs per head of one Longformer layer: the dilated band, plus the global rows and
    columns when there are global tokens (dilation 1 then, as the encoders use)."""
    if global_tokens:
        return [attended_pairs(length, window, global_tokens) for _ in dilations]
    return [dilated_pairs(length, window, d, causal) for d in dilations]


def masked_lm_head_flops(masked: int, hidden: int, vocab: int) -> int:
    return 2 * masked * (hidden * hidden + hidden * vocab)


def step_flops(forward: int) -> int:
    """A training step's useful FLOPs from its forward's: backward = 2x forward."""
    return FORWARD_BACKWARD * forward
