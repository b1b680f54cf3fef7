"""The optimal one-to-one alignment of a weight matrix (the Hungarian algorithm), as CEAF needs it,
in plain Python: scipy is not a dependency of the project, and the matrices are small.

``max_weight_matching(weights)``: the rows and columns to pair (each at most once) so that the sum
of the paired weights is largest. Weights are >= 0, so a partial pairing is a full one padded with
zero pairs; the scorer's Munkres over a square matrix padded with ones (cost 1 - similarity) finds
the same largest sum.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple


def _min_cost_assignment(cost: Sequence[Sequence[float]]) -> List[int]:
    """Column of each row for the least total cost, ``n`` rows <= ``m`` columns (every row paired).
    The shortest augmenting path form with row and column potentials, O(n^2 m)."""
    n, m = len(cost), len(cost[0])
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner = [0] * (m + 1)  # owner[j]: the row (1-based) paired with column j; column 0 is the free start
    for i in range(1, n + 1):
        owner[0], j0 = i, 0
        low, way, used = [inf] * (m + 1), [0] * (m + 1), [False] * (m + 1)
        while owner[j0] != 0:
            used[j0] = True
            i0, delta, j1 = owner[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = cost[i0 - 1][j - 1] - u[i0] - v[j]
                    if reduced < low[j]:
                        low[j], way[j] = reduced, j0
                    if low[j] < delta:
                        delta, j1 = low[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    low[j] -= delta
            j0 = j1
        while j0:  # flip the augmenting path
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    column = [0] * n
    for j in range(1, m + 1):
        if owner[j]:
            column[owner[j] - 1] = j - 1
    return column


def max_weight_matching(weights: Sequence[Sequence[float]]) -> List[Tuple[int, int]]:
    """(row, column) pairs of a largest-sum one-to-one pairing; pairs of weight 0 left out."""
    if not weights or not weights[0]:
        return []
    transpose = len(weights) > len(weights[0])
    w = [list(col) for col in zip(*weights)] if transpose else weights
    pairs = [(i, j) for i, j in enumerate(_min_cost_assignment([[-x for x in row] for row in w]))]
    pairs = [(j, i) for i, j in pairs] if transpose else pairs
    return sorted((i, j) for i, j in pairs if weights[i][j] > 0)
