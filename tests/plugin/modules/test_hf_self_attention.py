"""Our LongformerSelfAttention against Hugging Face's, weight for weight.

Hugging Face's ``LongformerSelfAttention`` (transformers.models.longformer) is the module every
released Longformer checkpoint runs in, so agreeing with it is what makes export meaningful. The
two modules are given the same six projections (HF's self-attention has no output projection:
``LongformerAttention`` adds ``output.dense`` after it), so our ``out_proj`` is set to the
identity and the outputs are compared directly.

HF conventions reproduced here (read in transformers 5.23, modeling_longformer.py):
  * ``attention_window`` is TWO-sided: HF 2w is our one-sided w.
  * the self-attention module takes ``hidden_states`` (B, N, C), already padded by
    ``LongformerModel`` to a multiple of the window 2w (``_sliding_chunks_query_key_matmul``
    asserts it), and the mask in the encoder's internal form: a float (B, N) tensor,
    < 0 for padding (``torch.finfo(dtype).min`` since the 5.x mask API; -10000 in 4.x),
    0 for local and > 0 for global tokens (``torch.finfo(dtype).max``; +10000 in 4.x), plus
    ``is_index_masked = mask < 0``, ``is_index_global_attn = mask > 0`` and
    ``is_global_attn = is_index_global_attn.any()``, computed once by ``LongformerEncoder``.
  * HF zeroes the attention probabilities of padding rows, so its padding rows are exactly
    zero, as ours are: all rows are compared, padding included.
"""
import pytest
import torch

hf_longformer = pytest.importorskip("transformers.models.longformer.modeling_longformer")

from longformer_kernels import AttentionMasks, AttentionPattern  # noqa: E402
from fairseq_longformer.modules.self_attention import (  # noqa: E402
    LongformerAttentionConfig,
    LongformerSelfAttention,
)

HIDDEN, HEADS = 64, 4
TOLERANCE = 1e-5
# ours -> HF parameter names
NAME_MAP = {
    "q_proj": "query", "k_proj": "key", "v_proj": "value",
    "q_global_proj": "query_global", "k_global_proj": "key_global", "v_global_proj": "value_global",
}


def build_pair(window: int, hf_window: int = None, seed: int = 0):
    """(ours, hf) with identical weights; ``hf_window`` (one-sided) defaults to ``window``."""
    hf_window = window if hf_window is None else hf_window
    config = hf_longformer.LongformerConfig(
        hidden_size=HIDDEN, num_attention_heads=HEADS, num_hidden_layers=1,
        attention_window=[2 * hf_window],  # HF's window is two-sided
        attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0,
    )
    torch.manual_seed(seed)
    hf = hf_longformer.LongformerSelfAttention(config, layer_id=0).eval()
    ours = LongformerSelfAttention(
        HIDDEN, HEADS, LongformerAttentionConfig(AttentionPattern(window=window), impl="torch")
    ).eval()
    with torch.no_grad():
        for mine, theirs in NAME_MAP.items():
            # fresh random weights and biases (HF's init leaves biases at zero, which would hide
            # a bias mix-up), copied into both modules
            weight = torch.randn(HIDDEN, HIDDEN) * HIDDEN ** -0.5
            bias = torch.randn(HIDDEN) * 0.1
            getattr(hf, theirs).weight.copy_(weight)
            getattr(hf, theirs).bias.copy_(bias)
            getattr(ours, mine).weight.copy_(weight)
            getattr(ours, mine).bias.copy_(bias)
        # HF's self-attention stops before the output projection: make ours the identity
        ours.out_proj.weight.copy_(torch.eye(HIDDEN))
        ours.out_proj.bias.zero_()
    return ours, hf


def make_masks(batch: int, length: int, global_positions, padding_lengths):
    """(B, N) bool masks: global_positions[b] lists row b's global tokens, padding_lengths[b] its
    trailing padding."""
    is_global = torch.zeros(batch, length, dtype=torch.bool)
    padding = torch.zeros(batch, length, dtype=torch.bool)
    for b in range(batch):
        is_global[b, list(global_positions[b])] = True
        if padding_lengths[b]:
            padding[b, length - padding_lengths[b]:] = True
    return padding, is_global


def hf_forward(hf, x, padding, is_global):
    """Run HF's self-attention on x (B, N, C) with the mask LongformerModel/Encoder would build."""
    dtype = x.dtype
    mask = torch.zeros(padding.shape, dtype=dtype)
    mask = mask.masked_fill(is_global, torch.finfo(dtype).max)
    mask = mask.masked_fill(padding, torch.finfo(dtype).min)  # padding wins, as in HF's merge
    is_index_masked = mask < 0
    is_index_global_attn = mask > 0
    is_global_attn = bool(is_index_global_attn.flatten().any())
    (out,) = hf(x, attention_mask=mask, is_index_masked=is_index_masked,
                is_index_global_attn=is_index_global_attn, is_global_attn=is_global_attn)
    return out  # (B, N, C)


def ours_forward(ours, x, padding, is_global):
    masks = AttentionMasks(padding=padding, is_global=is_global)
    out, _ = ours(x.transpose(0, 1), key_padding_mask=masks)  # fairseq modules are time-first
    return out.transpose(0, 1)


# (window w one-sided, length N a multiple of 2w, global positions per row, padding per row)
CASES = {
    "local-only": (8, 64, [[], []], [0, 0]),
    "local-only-one-chunk": (8, 16, [[], []], [0, 0]),
    # w=2 is HF's smallest working window: at w=1 (attention_window=2) its
    # _sliding_chunks_query_key_matmul fails on a `1 - window_overlap` slice (transformers 5.23)
    "w2-global-and-padding": (2, 20, [[7], [0, 1, 2]], [3, 0]),
    "global-different-count-per-row": (8, 64, [[0, 5, 17, 40], [0]], [0, 0]),
    "global-in-one-row-only": (4, 40, [[], [3, 39]], [0, 0]),
    "padding-only": (8, 64, [[], []], [0, 23]),
    "padding-and-global": (8, 64, [[0, 1, 33], [0, 12]], [9, 30]),
    "global-next-to-padding-window-larger-than-rest": (16, 64, [[2, 47], [0, 31]], [0, 33]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_hugging_face(name):
    window, length, global_positions, padding_lengths = CASES[name]
    batch = len(global_positions)
    ours, hf = build_pair(window)
    padding, is_global = make_masks(batch, length, global_positions, padding_lengths)
    torch.manual_seed(1)
    x = torch.randn(batch, length, HIDDEN)

    x_ours = x.clone().requires_grad_()
    x_hf = x.clone().requires_grad_()
    out_ours = ours_forward(ours, x_ours, padding, is_global)
    out_hf = hf_forward(hf, x_hf, padding, is_global)

    assert out_ours.shape == out_hf.shape == (batch, length, HIDDEN)
    assert torch.isfinite(out_hf).all() and torch.isfinite(out_ours).all()
    torch.testing.assert_close(out_ours, out_hf, rtol=0, atol=TOLERANCE)
    # both leave padding rows at zero (HF zeroes their attention probabilities)
    if padding.any():
        assert out_ours[padding].abs().max().item() == 0.0
        assert out_hf[padding].abs().max().item() == 0.0

    # gradients too: the same loss through both modules gives the same input and weight grads
    grad_out = torch.randn_like(out_ours)
    (out_ours * grad_out).sum().backward()
    (out_hf * grad_out).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_hf.grad, rtol=0, atol=1e-4)
    for mine, theirs in NAME_MAP.items():
        if not is_global[~padding].any() and "global" in mine:
            continue  # no global token: the global projections are unused by both
        torch.testing.assert_close(getattr(ours, mine).weight.grad, getattr(hf, theirs).weight.grad,
                                   rtol=0, atol=1e-4, msg=lambda m: f"{mine}.weight grad: {m}")


@pytest.mark.parametrize("hf_window", [7, 9])
def test_comparison_detects_a_window_off_by_one(hf_window):
    """The comparison above has power: HF at w +- 1 (HF 2w +- 2) no longer matches ours at w=8."""
    ours, hf = build_pair(8, hf_window=hf_window)
    padding, is_global = make_masks(2, 72 if hf_window == 9 else 56, [[0, 3], []], [0, 0])
    x = torch.randn(2, padding.shape[1], HIDDEN)
    with torch.no_grad():
        difference = (ours_forward(ours, x, padding, is_global) - hf_forward(hf, x, padding, is_global))
    assert difference.abs().max().item() > 100 * TOLERANCE


def test_comparison_detects_swapped_global_projections():
    """Swapping HF's key_global and value_global weights must break agreement on global rows."""
    ours, hf = build_pair(8)
    with torch.no_grad():
        key_weight = hf.key_global.weight.clone()
        hf.key_global.weight.copy_(hf.value_global.weight)
        hf.value_global.weight.copy_(key_weight)
    padding, is_global = make_masks(1, 32, [[0, 20]], [0])
    x = torch.randn(1, 32, HIDDEN)
    with torch.no_grad():
        difference = ours_forward(ours, x, padding, is_global) - hf_forward(hf, x, padding, is_global)
    assert difference[is_global].abs().max().item() > 100 * TOLERANCE
    torch.testing.assert_close(difference[~is_global], torch.zeros_like(difference[~is_global]),
                               rtol=0, atol=TOLERANCE)
