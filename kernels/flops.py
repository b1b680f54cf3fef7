"""Useful floating-point operations of Longformer attention: the one count every benchmark of the
project uses, CPU (``longformer-bench``, ``tools/bench``) and GPU (``gpu_bench``, the H200 pages).

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

Shapes: B batch, N length, H heads, D head dim, C = H*D, w one-sided window (dilation 1, not
causal), G global tokens. Pure arithmetic, standard library only (``longformer_kernels`` imports
nothing but torch and the stdlib): tests/kernels/test_flops.py checks the counts by brute force.
"""
from dataclasses import dataclass

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
