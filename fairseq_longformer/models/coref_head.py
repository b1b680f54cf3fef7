"""The coarse-to-fine coreference head of Joshi et al. (2019) (``mandarjoshi90/coref``,
``independent.py`` with ``experiments.conf``'s settings), on one document's encoder features.

Shapes: T subtokens, C the encoder width, W = ``max_width`` (30), M candidate spans, k kept
spans (0.4 T, at most 3,900), c antecedents per span (at most 50), D = 3C + F the span vector
(start, end, head, width embedding of F = 20), F the feature size.

1. Candidates: every span of <= W subtokens inside a sentence (``coref_spans.candidate_spans``).
2. Span vector [x_start; x_end; width embedding; attention-weighted head]; mention score
   FFNN(span) + a width prior FFNN(width prior embedding).
3. The k best by mention score, chosen greedily without crossing a chosen span.
4. Coarse: s_m(i) + s_m(j) + bilinear(i, j) + a distance prior, for j < i; the c best antecedents.
5. Fine: FFNN([g_i; g_j; g_i * g_j; same speaker; genre; distance bucket; segment distance]),
   added to the coarse score; depth-2 higher-order refinement (an attention over the antecedents
   and the span itself, gated into the span vector) between the two scorings.
6. Loss: -log of the summed probability of the gold antecedents among the c and a dummy of
   score 0 (the dummy is gold when no candidate is), summed over the k spans.

No Python loop over spans or antecedents: the pairwise tensors are (k, c, .), the only (k, k)
tensor holds the scalar coarse scores (as in the original). The span-head loop runs over the W
widths (``coref_spans.span_heads``); the selection loops over rounds (``select_non_crossing``).
Differences from the TensorFlow original: when fewer than k spans can be kept, the original pads
its list with copies of the first, this keeps fewer; the last refinement update, whose result the
original computes and never reads, is skipped.
"""
import math
from dataclasses import dataclass
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from longformer_preprocessing.tasks.conll2012 import GENRES
from torch import Tensor, nn

from .coref_spans import bucket_distance, candidate_spans, select_non_crossing, span_heads

HEAD_NAME = "coref"  # its key in the model's span_heads (the task adds it, the criterion reads it)
INIT_STD = 0.02  # util.ffnn / util.projection: truncated normal (cut at 2 std), biases zero
# The reference's training window: spanbert_base / bert_large in experiments.conf cut a training
# document to max_training_sentences = 3 segments of max_segment_len = 384 subwords, and clip the
# segment distance to those 3 buckets.
REFERENCE_WINDOW = 3 * 384


def genre_index(genre: str) -> int:
    """The genre's embedding row: OntoNotes' genres in ``GENRES`` order; anything else shares one
    more row (the head is built with ``len(GENRES) + 1``)."""
    return GENRES.index(genre) if genre in GENRES else len(GENRES)


def segment_distance_buckets(segment_length: int) -> int:
    """Segment-distance embedding rows for segments of ``segment_length`` subwords: as many
    segments as the reference's 1,152-subword training window holds (3 at 384 and 512, as its
    configurations; 1 at 4,096, where a document is mostly one segment)."""
    return max(1, math.ceil(REFERENCE_WINDOW / segment_length))


@dataclass(frozen=True)
class CorefHeadConfig:
    embed_dim: int
    max_width: int = 30
    feature_size: int = 20
    ffnn_size: int = 3000
    ffnn_depth: int = 1
    dropout: float = 0.3
    top_span_ratio: float = 0.4
    max_top_spans: int = 3900
    max_antecedents: int = 50
    depth: int = 2
    max_segments: int = 3  # segment-distance buckets: segment_distance_buckets(384), the original's
    genres: int = len(GENRES) + 1  # genre_index's rows: OntoNotes' genres and one for any other


class FFNN(nn.Sequential):
    """``util.ffnn``: depth x (Linear, ReLU, dropout), then a Linear to ``out``."""

    def __init__(self, inp: int, hidden: int, depth: int, out: int, dropout: float):
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(inp, hidden), nn.ReLU(), nn.Dropout(dropout)]
            inp = hidden
        super().__init__(*layers, nn.Linear(inp, out))


class CorefHead(nn.Module):
    def __init__(self, cfg: CorefHeadConfig):
        super().__init__()
        self.cfg = cfg
        c, f = cfg.embed_dim, cfg.feature_size
        span_dim = 3 * c + f
        self.dropout = nn.Dropout(cfg.dropout)
        self.width_emb = nn.Embedding(cfg.max_width, f)
        self.head_scorer = nn.Linear(c, 1)
        self.mention_ffnn = FFNN(span_dim, cfg.ffnn_size, cfg.ffnn_depth, 1, cfg.dropout)
        self.width_prior_emb = nn.Embedding(cfg.max_width, f)
        self.width_prior_ffnn = FFNN(f, cfg.ffnn_size, cfg.ffnn_depth, 1, cfg.dropout)
        self.coarse_bilinear = nn.Linear(span_dim, span_dim)
        self.distance_prior_emb = nn.Embedding(10, f)
        self.distance_prior = nn.Linear(f, 1)
        self.same_speaker_emb = nn.Embedding(2, f)
        self.genre_emb = nn.Embedding(cfg.genres, f)
        self.distance_emb = nn.Embedding(10, f)
        self.segment_distance_emb = nn.Embedding(cfg.max_segments, f)
        self.fine_ffnn = FFNN(3 * span_dim + 4 * f, cfg.ffnn_size, cfg.ffnn_depth, 1, cfg.dropout)
        self.gate = nn.Linear(2 * span_dim, span_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference's initialisation: every weight (FFNN, projection, embedding table)
        truncated normal of std 0.02 cut at 2 std, every bias zero. (The reference gives its
        FFNNs and projections this; its feature embeddings take TensorFlow's default, Glorot
        uniform: here they get the same 0.02 as the rest, as issue 50 decided.)"""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.trunc_normal_(p, std=INIT_STD, a=-2 * INIT_STD, b=2 * INIT_STD)

    def num_kept(self, num_tokens: int) -> int:
        return max(1, min(self.cfg.max_top_spans, int(num_tokens * self.cfg.top_span_ratio)))

    def forward(self, x: Tensor, sentence_map: Tensor, speakers: Tensor, segments: Tensor, genre: int,
                gold_starts: Optional[Tensor] = None, gold_ends: Optional[Tensor] = None,
                gold_clusters: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """x (T, C) one document's features; sentence_map, speakers, segments (T,) ids per subtoken;
        genre the document's row, ``genre_index(genre)``; gold_* (G,) gold mentions (subtoken
        spans) and their cluster ids (>= 1), optional. Returns starts, ends (k,), antecedents (k, c) indices into the k
        spans, scores (k, c + 1) (column 0 the dummy, -inf where no antecedent), and with gold
        the loss (a scalar, summed over the k spans)."""
        cfg = self.cfg
        n = x.shape[0]
        starts, ends = candidate_spans(sentence_map, cfg.max_width)
        widths = ends - starts
        heads = span_heads(x, self.head_scorer(x).squeeze(-1), cfg.max_width)[starts, widths]
        spans = torch.cat([x[starts], x[ends], self.dropout(self.width_emb(widths)), heads], -1)  # (M, D)
        width_prior = self.width_prior_ffnn(self.width_prior_emb.weight).squeeze(-1)  # (W,)
        mention = self.mention_ffnn(spans).squeeze(-1) + width_prior[widths]  # (M,)

        kept = select_non_crossing(mention, starts, ends, self.num_kept(n), n, cfg.max_width)
        k = kept.shape[0]
        c = min(cfg.max_antecedents, k)
        top_starts, top_ends, emb, top_mention = starts[kept], ends[kept], spans[kept], mention[kept]

        # coarse: (k, k) scalar scores, the c best earlier spans
        offsets = torch.arange(k, device=x.device)[:, None] - torch.arange(k, device=x.device)[None, :]
        earlier = offsets >= 1
        coarse = top_mention[:, None] + top_mention[None, :] + self.dropout(self.coarse_bilinear(emb)) @ self.dropout(emb).t()
        prior = self.distance_prior(self.dropout(self.distance_prior_emb.weight)).squeeze(-1)  # (10,)
        coarse = coarse + prior[bucket_distance(offsets.clamp(min=0))]
        coarse = coarse.masked_fill(~earlier, float("-inf"))
        top_coarse, antecedents = coarse.topk(c, dim=1)  # (k, c)
        valid = earlier.gather(1, antecedents)
        ant_offsets = offsets.gather(1, antecedents)

        # fine: pairwise features (k, c, 4F)
        same_speaker = (speakers[top_starts][:, None] == speakers[top_starts][antecedents]).long()
        segment_distance = (segments[top_starts][:, None] - segments[top_starts][antecedents]).clamp(0, cfg.max_segments - 1)
        features = torch.cat([self.same_speaker_emb(same_speaker),
                              self.genre_emb.weight[genre].expand(k, c, -1),
                              self.distance_emb(bucket_distance(ant_offsets.clamp(min=0))),
                              self.segment_distance_emb(segment_distance)], -1)
        features = self.dropout(features)
        dummy = emb.new_zeros(k, 1)
        for depth in range(cfg.depth):
            ant_emb = emb[antecedents]  # (k, c, D)
            target = emb[:, None].expand_as(ant_emb)
            pair = torch.cat([target, ant_emb, target * ant_emb, features], -1)
            scores = top_coarse + self.fine_ffnn(pair).squeeze(-1)
            scores = scores.masked_fill(~valid, float("-inf"))
            if depth + 1 < cfg.depth:  # refine the span vectors by what they attend to
                weights = torch.softmax(torch.cat([dummy, scores], 1), 1)  # (k, c + 1)
                attended = (weights[:, :, None] * torch.cat([emb[:, None], ant_emb], 1)).sum(1)
                gate = torch.sigmoid(self.gate(torch.cat([emb, attended], -1)))
                emb = gate * attended + (1 - gate) * emb
        scores = torch.cat([dummy, scores], 1)  # (k, c + 1)
        out = {"starts": top_starts, "ends": top_ends, "antecedents": antecedents, "scores": scores}
        if gold_starts is not None:
            span_cluster = gold_cluster_ids(top_starts, top_ends, gold_starts, gold_ends, gold_clusters, n, cfg.max_width)
            out["loss"] = antecedent_loss(scores, span_cluster, antecedents, valid)
        return out


def gold_cluster_ids(starts: Tensor, ends: Tensor, gold_starts: Tensor, gold_ends: Tensor, gold_clusters: Tensor,
                     num_tokens: int, max_width: int) -> Tensor:
    """(k,) the gold cluster id of each span, 0 where it is no gold mention (gold mentions wider
    than max_width can be no span's)."""
    grid = torch.zeros(num_tokens * max_width + 1, dtype=torch.long, device=starts.device)
    width = gold_ends - gold_starts
    cell = torch.where(width < max_width, gold_starts * max_width + width, num_tokens * max_width)
    grid[cell] = gold_clusters.long()
    grid[-1] = 0
    return grid[starts * max_width + (ends - starts)]


def antecedent_loss(scores: Tensor, span_cluster: Tensor, antecedents: Tensor, valid: Tensor) -> Tensor:
    """scores (k, c + 1) with the dummy first; span_cluster (k,); antecedents, valid (k, c) ->
    sum over spans of logsumexp(all) - logsumexp(gold), the dummy gold where no antecedent is."""
    ant_cluster = span_cluster[antecedents]
    gold = (ant_cluster == span_cluster[:, None]) & valid & (span_cluster[:, None] > 0)
    labels = torch.cat([~gold.any(1, keepdim=True), gold], 1)
    scores = scores.float()
    gold_scores = scores.masked_fill(~labels, float("-inf"))
    return (torch.logsumexp(scores, 1) - torch.logsumexp(gold_scores, 1)).sum()


def predicted_clusters(starts: Tensor, ends: Tensor, antecedents: Tensor, scores: Tensor):
    """Greedy antecedent linking: each span joins the cluster of its best-scoring antecedent when
    that beats the dummy; returns clusters as lists of (start, end) subtoken spans, no
    singletons (the original's ``get_predicted_clusters``; a span follows its antecedents in
    position order, so one pass in order sees every antecedent's cluster first)."""
    best = scores.argmax(1) - 1  # (k,) -1: the dummy
    starts, ends, antecedents, best = starts.tolist(), ends.tolist(), antecedents.tolist(), best.tolist()
    cluster_of, clusters = {}, []
    for i, b in enumerate(best):  # a loop over the k predictions, after the model (decoding, not the forward)
        if b < 0:
            continue
        j = antecedents[i][b]
        antecedent, mention = (starts[j], ends[j]), (starts[i], ends[i])
        if antecedent not in cluster_of:
            cluster_of[antecedent] = len(clusters)
            clusters.append([antecedent])
        cluster_of[mention] = cluster_of[antecedent]
        clusters[cluster_of[antecedent]].append(mention)
    return clusters
