"""Useful FLOPs of one training step of a whole model (``longformer-bench train-steps``), the
numerator of its model FLOP utilisation (MFU). Same convention as ``flops.py`` (what the
function needs, whatever an implementation computes on the way; a multiply-add counts 2;
forward + backward = 3x the forward), extended from one attention layer to the stack:

  per layer    every token through q, k, v, output projection and the feed-forward pair:
               2*N*(4*C*C + 2*C*F); with G > 0 global tokens also k_g, v_g over all N rows and
               q_g over the G global rows (2 * 2*N*C*C + 2*G*C*C)
  attention    4*D per attended (query, key) pair and head: the band, each head at its dilation
               d (query i attends i + d*k, |k| <= w, inside the sequence; causal: k <= 0), plus
               the global rows and columns (``flops.attended_pairs``, dilation 1); a dense model
               attends all N*N pairs
  output       the masked LM's head over the M masked positions only (dense C x C and the
               decoder C x V: 2*M*(C*C + C*V)); a language model's decoder over all N
               positions (2*N*C*V)

Embeddings, layer norms, activations and the softmax are not counted. Shapes: N length, C width,
F feed-forward width, H heads, D = C / H, w one-sided window, V vocabulary. Pure arithmetic;
tests/tools/bench/test_train_steps.py checks ``dilated_pairs`` by brute force.
"""
from typing import Iterable, Tuple

from .flops import attended_pairs


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
    return 3 * forward
