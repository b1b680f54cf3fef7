"""Span bookkeeping of the coarse-to-fine coreference head (``coref_head.py``), vectorised.

Shapes: T subtokens of one document, W the widest span (Joshi et al.'s ``max_span_width``, 30),
M candidate spans, k kept spans. A span is (start, end), inclusive, in subtokens.

- ``candidate_spans``: every span of width <= W inside one sentence, as a (T, W) grid flattened
  and masked (the grid order: by start, then width).
- ``span_heads``: each span's attention-weighted head vector, for all (T, W) cells at once by an
  online softmax over widths (a loop over the W widths, never over spans): memory (T, W, C)
  instead of the (M, T) attention matrix of the TensorFlow original.
- ``select_non_crossing``: the greedy selection of Joshi et al.'s ``extract_spans`` kernel (spans
  in descending score order; one is kept unless it crosses a kept one; stop at k), computed in
  rounds of tensor operations (see its docstring).
- ``bucket_distance``: the 10 semi-log distance buckets [0, 1, 2, 3, 4, 5-7, 8-15, 16-31, 32-63, 64+].
"""
from typing import Tuple

import torch
from torch import Tensor


def candidate_spans(sentence_map: Tensor, max_width: int) -> Tuple[Tensor, Tensor]:
    """sentence_map (T,) -> starts (M,), ends (M,): the spans of <= max_width subtokens that start
    and end in the same sentence, ordered by start, then end."""
    n = sentence_map.shape[0]
    starts = torch.arange(n, device=sentence_map.device)[:, None].expand(n, max_width)
    ends = starts + torch.arange(max_width, device=sentence_map.device)[None, :]
    inside = (ends < n) & (sentence_map[starts] == sentence_map[ends.clamp(max=n - 1)])
    return starts[inside], ends[inside]


def span_heads(x: Tensor, scores: Tensor, max_width: int) -> Tensor:
    """x (T, C) token vectors, scores (T,) their head-attention logits -> (T, W, C): cell [s, w] is
    the softmax(scores[s..s+w])-weighted sum of x[s..s+w] (cells past the end repeat the last
    token; callers never read them). A running max keeps every exponent <= 0 (no overflow, and
    the span's own max term is exp(0) = 1, so no 0/0)."""
    n = x.shape[0]
    positions = torch.arange(n, device=x.device)
    scores = scores.float()
    top = torch.full((n,), float("-inf"), device=x.device)
    numerator = x.new_zeros(x.shape, dtype=torch.float32)
    denominator = x.new_zeros((n,), dtype=torch.float32)
    heads = []
    for w in range(max_width):
        index = (positions + w).clamp(max=n - 1)
        s = scores[index]
        new_top = torch.maximum(top, s).detach()  # a stabiliser: the softmax does not depend on it
        rescale = torch.exp(top - new_top)
        weight = torch.exp(s - new_top)
        numerator = numerator * rescale[:, None] + weight[:, None] * x[index].float()
        denominator = denominator * rescale + weight
        top = new_top
        heads.append(numerator / denominator[:, None])
    return torch.stack(heads, 1).to(x.dtype)


def _crossing_max(priority: Tensor, max_width: int) -> Tensor:
    """priority (T, W), -1 where no span -> (T, W): for each span (s, s + w), the largest priority
    of a span crossing it, -1 if none. (s', e') crosses (s, e) when s < s' <= e < e' or
    s' < s <= e' < e (the test of ``extract_spans``); widths bound both ranges by W."""
    n = priority.shape[0]
    device = priority.device
    none = priority.new_full((n, 1), -1)
    # later[s', x] = max priority of spans starting at s' of width > x
    later = torch.cat([priority.flip(1).cummax(1).values.flip(1)[:, 1:], none], 1)
    # by end: at_end[e', w'] = priority of (e' - w', e'); earlier[e', x] = max over width > x
    ends = torch.arange(n, device=device)[:, None] - torch.arange(max_width, device=device)[None, :]
    at_end = torch.where(ends >= 0, priority[ends.clamp(min=0), torch.arange(max_width, device=device)[None, :]],
                         priority.new_tensor(-1))
    earlier = torch.cat([at_end.flip(1).cummax(1).values.flip(1)[:, 1:], none], 1)
    # shift a = 1..W-1: span (s, w) against spans starting at s + a (a <= w), wider than w - a;
    # and against spans ending at s + w - a, reaching before s (wider than w - a)
    w = torch.arange(max_width, device=device)
    a = torch.arange(1, max_width, device=device)
    valid = a[None, :] <= w[:, None]  # (W, A)
    x = (w[:, None] - a[None, :]).clamp(min=0)  # (W, A)
    rows = torch.arange(n, device=device)[:, None, None]
    start_rows = (rows + a[None, None, :]).clamp(max=n - 1)  # (T, 1, A)
    end_rows = (rows + w[None, :, None] - a[None, None, :]).clamp(min=0, max=n - 1)  # (T, W, A)
    from_starts = later[start_rows.expand(n, max_width, -1), x[None].expand(n, -1, -1)]
    from_ends = earlier[end_rows, x[None].expand(n, -1, -1)]
    crossing = torch.maximum(from_starts, from_ends).masked_fill(~valid[None], -1)
    if crossing.shape[-1] == 0:
        return priority.new_full(priority.shape, -1)
    return crossing.max(-1).values


def select_non_crossing(scores: Tensor, starts: Tensor, ends: Tensor, k: int, num_tokens: int,
                        max_width: int) -> Tensor:
    """scores, starts, ends (M,) -> indices (<= k,) of the kept spans, sorted by (start, end).

    Sequential greedy (descending score; keep a span unless it crosses a kept one; stop at k)
    computed in parallel rounds: in a round, every undecided span whose higher-scored crossing
    spans are all decided (none is undecided) is kept, and every undecided span crossing a kept
    one is dropped. This gives exactly the sequential result (the lexicographically first maximal
    set of non-crossing spans in score order), of which the first k in score order are the
    sequential result with its stop at k. Rounds are few on real scores (each settles at least the
    best undecided span); every round is O(T W^2) tensor work, no Python loop over spans. Ties are
    broken by candidate order (a stable sort), as ``extract_spans`` sorts by score only."""
    device = scores.device
    m = scores.shape[0]
    order = torch.sort(scores.detach().float(), descending=True, stable=True).indices
    rank = torch.empty(m, dtype=torch.long, device=device)
    rank[order] = torch.arange(m, device=device)
    priority_of = m - rank  # higher is better, > 0
    cell = starts * max_width + (ends - starts)
    undecided = torch.full((num_tokens * max_width,), -1, dtype=torch.long, device=device)
    undecided[cell] = priority_of
    kept = torch.zeros(num_tokens * max_width, dtype=torch.bool, device=device)
    while bool((undecided >= 0).any()):
        grid = undecided.view(num_tokens, max_width)
        blocked = _crossing_max(grid, max_width).view(-1)
        accept = (undecided >= 0) & (blocked < undecided)
        kept |= accept
        accepted_grid = torch.where(accept, 1, -1).view(num_tokens, max_width)
        crosses_kept = _crossing_max(accepted_grid, max_width).view(-1) > 0
        undecided = torch.where(accept | crosses_kept, torch.full_like(undecided, -1), undecided)
    chosen = kept[cell].nonzero().squeeze(1)
    chosen = chosen[torch.argsort(rank[chosen])][:k]  # the first k kept in score order
    by_position = torch.argsort(starts[chosen] * (num_tokens + 1) + ends[chosen])
    return chosen[by_position]


def bucket_distance(distances: Tensor) -> Tensor:
    """distances (any shape, >= 0 where used) -> bucket ids in [0, 9]: identity up to 4, then
    floor(log2(d)) + 3, clipped at 9 (64 and more)."""
    d = distances.clamp(min=1).float()
    log_bucket = torch.floor(torch.log2(d)).long() + 3
    return torch.where(distances <= 4, distances, log_bucket).clamp(0, 9)
