"""Useful floating-point operations of one self-attention call of ``longformer-bench``, and the
matmul shapes whose measured speed is the machine's limit for that work (``matmul_limit``).

Useful FLOPs are what the layer's function needs, whatever a contender computes on the way
(dense SDPA scores all N x N pairs, the PyTorch path c x L per chunk, both more than the pattern
holds): multiply-adds count 2.

  projections  q, k, v over all N rows: 3 * 2*B*N*C*C; with G > 0 global tokens also k_g, v_g over
               all N rows and q_g over the G global rows (2 * 2*B*N*C*C + 2*B*G*C*C); with the
               output projection 2*B*N*C*C more.
  pairs        every attended (query i, key j): the band |i - j| <= w inside 0 <= i, j < N, plus
               the global rows and columns (the benchmark's G global tokens are the first G
               positions), each pair counted once (``attended_pairs``). A pair costs 4*D per
               head: 2*D for q.k and 2*D for p.v, so B * pairs * 4*C for all heads.
  backward     twice the forward (two matmuls per forward matmul), forward+backward = 3x forward.

Shapes: B batch, N length, H heads, D head dim, C = H*D, w one-sided window, G global tokens.
Pure arithmetic, no torch: the unit test checks the pair count against a brute-force count.
"""
from dataclasses import dataclass
from typing import List


def band_pairs(length: int, window: int) -> int:
    """Pairs (i, j), 0 <= i, j < N, with |i - j| <= w. Each of the N rows has 2w + 1 keys but the
    first and last w rows lose 1, 2, .., w at the sequence ends: N*(2w + 1) - w*(w + 1), with w
    at most N - 1 (a wider window sees nothing more)."""
    window = min(window, max(length - 1, 0))
    return length * (2 * window + 1) - window * (window + 1)


def band_row_pairs(row: int, length: int, window: int) -> int:
    """Keys of row i in the band: positions max(0, i - w) .. min(N - 1, i + w)."""
    return min(row + window, length - 1) - max(row - window, 0) + 1


def attended_pairs(length: int, window: int, global_tokens: int) -> int:
    """Pairs (i, j) some query attends: the band, plus every pair in a global row or column (the
    first G positions), each pair once. The global rows and columns hold 2*G*N - G*G pairs;
    those of them that lie in the band are already in it: G band rows, G band columns, less the
    G x G corner counted in both."""
    glob = min(global_tokens, length)
    in_global_rows = sum(band_row_pairs(i, length, window) for i in range(glob))
    overlap = 2 * in_global_rows - band_pairs(glob, window)
    return band_pairs(length, window) + 2 * glob * length - glob * glob - overlap


@dataclass(frozen=True)
class LayerFlops:
    """Useful FLOPs of one forward call: ``projections`` (every Linear of the layer) and ``pairs``
    (q.k and p.v of every attended pair, half each)."""

    projections: int
    pairs: int

    @property
    def forward(self) -> int:
        return self.projections + self.pairs

    @property
    def forward_backward(self) -> int:
        return 3 * self.forward


def layer_flops(batch: int, length: int, heads: int, head_dim: int, window: int, global_tokens: int,
                output_projection: bool = False) -> LayerFlops:
    """The useful FLOPs of one call of the layer (see the module docstring)."""
    hidden = heads * head_dim
    glob = min(global_tokens, length)
    rows = 3 * length  # q, k, v: C x C per row each
    if glob:
        rows += 2 * length + glob  # k_g, v_g over every row, q_g over the global rows
    if output_projection:
        rows += length
    return LayerFlops(projections=2 * batch * rows * hidden * hidden,
                      pairs=4 * hidden * batch * attended_pairs(length, window, glob))


@dataclass(frozen=True)
class MatmulShape:
    """One matmul timed for the limit: (batch, m, k) @ (batch, k, n), and how many useful FLOPs of
    the layer it stands for in the forward and in the backward."""

    name: str
    batch: int
    m: int
    k: int
    n: int
    forward_weight: int
    backward_weight: int

    @property
    def flops(self) -> int:
        """FLOPs of one timed call."""
        return 2 * self.batch * self.m * self.k * self.n


def band_chunk(length: int, window: int):
    """(c, L): query positions per chunk and keys per window of the vectorized PyTorch path,
    c = max(w // 4, 32) (at most N) and L = c + 2w rounded up to a multiple of c, as its band
    layout has them (w at most N - 1)."""
    window = min(window, max(length - 1, 0))
    chunk = max(1, min(length, max(window // 4, 32)))
    return chunk, (1 + -(-2 * window // chunk)) * chunk


def limit_shapes(batch: int, length: int, heads: int, head_dim: int, window: int, global_tokens: int,
                 output_projection: bool = False) -> List[MatmulShape]:
    """The layer's own matmul shapes, weighted by the useful FLOPs each stands for:

      projection         (B*N, C) @ (C, C): every projection forward, and its input gradient
      projection weight  (C, B*N) @ (B*N, C): the weight gradients (backward only)
      band scores        (windows, c, D) @ (D, L): q.k forward, dP = dO.V^T backward
      band mixing        (windows, c, L) @ (L, D): p.v forward, dQ = dS.K backward
      band transposed    (windows, L, c) @ (c, D): dV = P^T.dO and dK = dS^T.Q (backward only)

    with windows = B*H*ceil(N/c), c and L as ``band_chunk`` has them. The pairs' FLOPs (global ones included) are
    split half to q.k, half to p.v; each backward weight is what that backward matmul does, so the
    backward weights sum to twice the forward's."""
    flops = layer_flops(batch, length, heads, head_dim, window, global_tokens, output_projection)
    hidden, rows = heads * head_dim, batch * length
    chunk, keys = band_chunk(length, window)
    windows = batch * heads * -(-length // chunk)
    half = flops.pairs // 2
    return [
        MatmulShape("projection", 1, rows, hidden, hidden, flops.projections, flops.projections),
        MatmulShape("projection weight", 1, hidden, rows, hidden, 0, flops.projections),
        MatmulShape("band scores", windows, chunk, head_dim, keys, half, half),
        MatmulShape("band mixing", windows, chunk, keys, head_dim, flops.pairs - half, flops.pairs - half),
        MatmulShape("band transposed", windows, keys, chunk, head_dim, 0, flops.pairs),
    ]
