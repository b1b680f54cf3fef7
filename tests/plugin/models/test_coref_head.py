"""The coreference head's vectorised pieces against slow loop-based references written from
mandarjoshi90/coref's definitions: span enumeration (``independent.py``), the greedy non-crossing
selection (``coref_kernels.cc``'s ``extract_spans``: the crossing test written as it is there),
the span head attention (a softmax per span), the distance buckets and the marginal loss."""
import math

import pytest
import torch

from fairseq_longformer.models.coref_head import (
    CorefHead, CorefHeadConfig, antecedent_loss, gold_cluster_ids, predicted_clusters,
)
from fairseq_longformer.models.coref_spans import bucket_distance, candidate_spans, select_non_crossing, span_heads


def slow_candidates(sentence_map, max_width):
    n = len(sentence_map)
    return [(s, e) for s in range(n) for e in range(s, min(n, s + max_width))
            if sentence_map[s] == sentence_map[e]]


def slow_extract_spans(scores, starts, ends, k):
    """extract_spans as coref_kernels.cc loops it: descending score, a span is skipped when it
    crosses a kept one (start_to_latest_end / end_to_earliest_start), stop at k."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # Python's sort is stable, as ours
    latest_end, earliest_start, kept = {}, {}, []
    for i in order:
        if len(kept) == k:
            break
        s, e = starts[i], ends[i]
        crossing = False
        for j in range(s, e + 1):
            if j > s and j in latest_end and latest_end[j] > e:
                crossing = True
            if j < e and j in earliest_start and earliest_start[j] < s:
                crossing = True
        if crossing:
            continue
        kept.append(i)
        latest_end[s] = max(latest_end.get(s, -1), e)
        earliest_start[e] = min(earliest_start.get(e, 10 ** 9), s)
    return sorted(kept, key=lambda i: (starts[i], ends[i]))


def test_candidates_stay_inside_sentences_and_width():
    sentence_map = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3])
    starts, ends = candidate_spans(sentence_map, 3)
    assert list(zip(starts.tolist(), ends.tolist())) == slow_candidates(sentence_map.tolist(), 3)


@pytest.mark.parametrize("seed", range(6))
def test_selection_equals_the_sequential_greedy(seed):
    g = torch.Generator().manual_seed(seed)
    n, width = 40, 6
    sentence_map = torch.cumsum(torch.rand(n, generator=g) < 0.15, 0)
    starts, ends = candidate_spans(sentence_map, width)
    scores = torch.randn(len(starts), generator=g)
    if seed % 2:  # ties: the stable order decides, in both
        scores = torch.round(scores * 2) / 2
    for k in (1, 5, 16, 1000):
        got = select_non_crossing(scores, starts, ends, k, n, width)
        want = slow_extract_spans(scores.tolist(), starts.tolist(), ends.tolist(), k)
        assert got.tolist() == want


def test_selection_hand_made():
    # (0,2) best; (1,3) crosses it; (2,2) is nested (allowed); (3,4) disjoint; (2,3) crosses (0,2)
    starts, ends = torch.tensor([0, 1, 2, 3, 2]), torch.tensor([2, 3, 2, 4, 3])
    scores = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])
    assert select_non_crossing(scores, starts, ends, 10, 5, 3).tolist() == [0, 2, 3]
    assert select_non_crossing(scores, starts, ends, 2, 5, 3).tolist() == [0, 2]


def test_span_heads_are_a_softmax_per_span():
    g = torch.Generator().manual_seed(0)
    x, a = torch.randn(9, 5, generator=g), torch.randn(9, generator=g) * 30  # large logits: no overflow
    grid = span_heads(x, a, 4)
    for s in range(9):
        for w in range(min(4, 9 - s)):
            weights = torch.softmax(a[s:s + w + 1], 0)
            torch.testing.assert_close(grid[s, w], (weights[:, None] * x[s:s + w + 1]).sum(0))


def test_bucket_distance():
    want = [0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 7, 7, 8, 9, 9]
    d = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 31, 63, 64, 1000])
    assert bucket_distance(d).tolist() == want


def test_loss_against_hand_computed_marginal():
    # 3 spans; span 2 has antecedents 0 (same cluster) and 1 (other); span 1 has antecedent 0 only
    scores = torch.tensor([[0.0, -math.inf, -math.inf], [0.0, 1.0, -math.inf], [0.0, 2.0, 0.5]])
    antecedents = torch.tensor([[0, 0], [0, 0], [0, 1]])
    valid = torch.tensor([[False, False], [True, False], [True, True]])
    cluster = torch.tensor([1, 0, 1])
    # span 0: dummy gold, no candidates: 0; span 1: not a mention: -log softmax(dummy) over (0, 1);
    # span 2: gold antecedent 0 with score 2 among (0, 2, 0.5)
    want = (math.log(1 + math.e) - 0.0) + (math.log(1 + math.e ** 2 + math.e ** 0.5) - 2.0)
    assert antecedent_loss(scores, cluster, antecedents, valid).item() == pytest.approx(want, rel=1e-6)


def test_gold_cluster_ids_and_greedy_linking():
    starts, ends = torch.tensor([0, 2, 5]), torch.tensor([1, 2, 40])
    ids = gold_cluster_ids(starts, ends, torch.tensor([0, 2, 5]), torch.tensor([1, 2, 40]), torch.tensor([1, 1, 2]),
                           50, 30)
    assert ids.tolist() == [1, 1, 0]  # (5, 40) is wider than 30: no span can be it
    scores = torch.tensor([[0.0, -1.0], [0.0, 3.0], [0.0, -2.0]])
    antecedents = torch.tensor([[0], [0], [1]])
    assert predicted_clusters(starts, ends, antecedents, scores) == [[(0, 1), (2, 2)]]


def test_head_forward_backward_shapes_and_no_quadratic_pairs():
    torch.manual_seed(0)
    cfg = CorefHeadConfig(embed_dim=8, max_width=5, feature_size=4, ffnn_size=16, max_antecedents=3, dropout=0.0)
    head = CorefHead(cfg)
    n = 60
    x = torch.randn(n, 8, requires_grad=True)
    sentence_map = torch.arange(n) // 10
    out = head(x, sentence_map, torch.arange(n) % 2, torch.arange(n) // 30, 3,
               torch.tensor([0, 12, 30]), torch.tensor([1, 13, 31]), torch.tensor([1, 1, 1]))
    k = head.num_kept(n)
    assert out["starts"].shape == (k,) and out["antecedents"].shape == (k, 3) and out["scores"].shape == (k, 4)
    out["loss"].backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
