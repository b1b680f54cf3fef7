"""The matmul shapes whose measured speed is the machine's limit for one self-attention call of
``longformer-bench`` (``matmul_limit``), weighted by the useful FLOPs each stands for.

The FLOP count itself is ``longformer_kernels.flops`` (one function for every benchmark, CPU and
GPU, its convention in that module's docstring); its names are re-exported here for the CPU tools.
"""
from dataclasses import dataclass
from typing import List

from longformer_kernels import (FORWARD_BACKWARD, LayerFlops, attended_pairs, attention_flops,  # noqa: F401
                                band_pairs, band_row_pairs, layer_flops)


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
