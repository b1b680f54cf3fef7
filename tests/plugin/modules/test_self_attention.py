"""LongformerSelfAttention as a module, in each of its homes: against the exact reference
(global tokens, padding, attention dropout), inside fairseq's TransformerDecoderLayer (causal)
against fairseq's own MultiheadAttention with the same mask, and through the Triton kernel
(interpreter on CPU) against the PyTorch path, module and model."""
import argparse

import pytest
import torch
from fairseq.models.transformer import TransformerModel
from fairseq.modules import TransformerDecoderLayer

import fairseq_longformer  # noqa: F401  (registers the plugin)
from fairseq_longformer.modules.layers import LongformerDecoderLayer
from fairseq_longformer.modules.self_attention import LongformerAttentionConfig, LongformerSelfAttention
from longformer_kernels import AttentionDropout, AttentionMasks, AttentionPattern, reference_attention
from longformer_kernels.reference import allowed_keys

from tests.plugin.models.test_longformer import TINY, DictTask, build, tokens

HIDDEN, HEADS = 16, 2


def masks_for(length, batch=2):
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[1, length - 5:] = True
    is_global = torch.zeros(batch, length, dtype=torch.bool)
    is_global[0, [0, length // 2]] = True
    is_global[1, 3] = True
    return AttentionMasks(padding=padding, is_global=is_global)


def module_seed(torch_seed: int) -> int:
    """The dropout seed the module draws after torch.manual_seed(torch_seed) (see _dropout)."""
    torch.manual_seed(torch_seed)
    return int(torch.randint(0, 2 ** 31 - 1, (1,)))


@pytest.mark.parametrize("p_drop", [0.0, 0.2])
def test_module_matches_reference_with_global_tokens_padding_and_dropout(p_drop):
    """The module's global rows (computed through the weights) and local rows, in training mode
    with attention dropout, equal the reference fed with the module's own projections."""
    torch.manual_seed(0)
    pattern = AttentionPattern(window=3, dilation=(1, 2))
    attn = LongformerSelfAttention(HIDDEN, HEADS, LongformerAttentionConfig(pattern, impl="torch", dropout=p_drop))
    attn = attn.double().train()
    with torch.no_grad():  # distinct global projections, so a swap would show
        for glob in (attn.q_global_proj, attn.k_global_proj, attn.v_global_proj):
            glob.weight.normal_()
    x = torch.randn(30, 2, HIDDEN, dtype=torch.float64)
    masks = masks_for(30)
    seed = module_seed(42)
    torch.manual_seed(42)
    out = attn.attend(x, masks)

    def heads(linear):
        return linear(x).view(30, 2, HEADS, -1).permute(1, 2, 0, 3)

    projections = [heads(p) for p in (attn.q_proj, attn.k_proj, attn.v_proj, attn.q_global_proj,
                                      attn.k_global_proj, attn.v_global_proj)]
    dropout = AttentionDropout(p_drop, seed) if p_drop else None
    want = reference_attention(*projections, pattern, masks, dropout=dropout).permute(2, 0, 1, 3).reshape(30, 2, -1)
    torch.testing.assert_close(out, want, atol=1e-10, rtol=1e-10)

    # and the gradients through the module (global rows and dropout included) are the reference's
    grad = torch.randn_like(out)
    x.requires_grad_()
    torch.manual_seed(42)
    got = torch.autograd.grad((attn.attend(x, masks) * grad).sum(), [x] + list(attn.parameters()), allow_unused=True)
    projections = [heads(p) for p in (attn.q_proj, attn.k_proj, attn.v_proj, attn.q_global_proj,
                                      attn.k_global_proj, attn.v_global_proj)]
    ref = reference_attention(*projections, pattern, masks, dropout=dropout).permute(2, 0, 1, 3).reshape(30, 2, -1)
    want = torch.autograd.grad((ref * grad).sum(), [x] + list(attn.parameters()), allow_unused=True)
    for (name, _), a, b in zip([("x", None)] + list(attn.named_parameters()), got, want):
        if b is None:
            assert a is None or not a.any(), name
        else:
            torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-9, msg=lambda m: f"grad {name}: {m}")


def test_dropout_is_off_in_eval_and_fresh_each_training_call():
    attn = LongformerSelfAttention(HIDDEN, HEADS, LongformerAttentionConfig(AttentionPattern(4), impl="torch",
                                                                            dropout=0.3))
    x = torch.randn(20, 1, HIDDEN)
    attn.eval()
    assert torch.equal(attn.attend(x, AttentionMasks()), attn.attend(x, AttentionMasks()))
    attn.train()
    assert not torch.equal(attn.attend(x, AttentionMasks()), attn.attend(x, AttentionMasks()))


def decoder_args(**overrides):
    args = argparse.Namespace(decoder_layers=1, decoder_embed_dim=HIDDEN, decoder_ffn_embed_dim=32,
                              decoder_attention_heads=HEADS, dropout=0.0, attention_dropout=0.0,
                              activation_dropout=0.0, decoder_normalize_before=True, **overrides)
    TransformerModel.add_args  # noqa: B018  (fairseq's defaults come from base_architecture)
    from fairseq.models.transformer import base_architecture

    base_architecture(args)
    return args


@pytest.mark.parametrize("window,dilation", [(3, (1, 2)), (50, (1,))])
def test_causal_module_in_fairseq_decoder_layer_equals_dense_masked_attention(window, dilation):
    """Inside fairseq's TransformerDecoderLayer (the full-sequence call, with the future mask
    fairseq passes) the module equals fairseq's own layer with MultiheadAttention and the
    Longformer causal pattern as a dense additive mask. The state dict loads strictly both
    ways: a causal layer carries no global-projection weights."""
    torch.manual_seed(0)
    args = decoder_args()
    pattern = AttentionPattern(window=window, dilation=dilation, causal=True)
    config = LongformerAttentionConfig(pattern, impl="torch", global_projections=False)
    ours = LongformerDecoderLayer(args, config, no_encoder_attn=True).double().eval()
    theirs = TransformerDecoderLayer(args, no_encoder_attn=True).double().eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert not any("global" in name for name in ours.state_dict())

    length = 40
    x = torch.randn(length, 2, HIDDEN, dtype=torch.float64)
    future = torch.triu(torch.full((length, length), float("-inf"), dtype=torch.float64), 1)
    out, _, _ = ours(x, self_attn_mask=future)
    # the same pattern, per head, as fairseq's (B * H, N, N) additive mask
    no = [False] * length
    per_head = [allowed_keys(pattern, d, no, no) for d in pattern.dilation_per_head(HEADS)]
    dense = torch.stack(per_head).repeat(2, 1, 1)
    mask = torch.zeros(dense.shape, dtype=torch.float64).masked_fill_(~dense, float("-inf"))
    theirs.self_attn.forward = _with_mask(theirs.self_attn.forward, mask)
    want, _, _ = theirs(x, self_attn_mask=future)
    torch.testing.assert_close(out, want, atol=1e-10, rtol=1e-10)


def _with_mask(forward, mask):
    """fairseq's MultiheadAttention takes an (N, N) mask from the layer; a per-head (B * H, N, N)
    one replaces it here (its own F.multi_head_attention_forward accepts that shape)."""
    def call(*args, attn_mask=None, **kwargs):
        return forward(*args, attn_mask=mask, **kwargs)
    return call


def test_decoder_layer_refuses_non_causal_and_padded_incremental_calls():
    """(Step-by-step decoding itself is tested in tests/plugin/models/test_longformer_lm.py.)"""
    args = decoder_args()
    with pytest.raises(ValueError, match="causal"):
        LongformerDecoderLayer(args, LongformerAttentionConfig(AttentionPattern(3)))
    with pytest.raises(ValueError, match="causal"):
        LongformerAttentionConfig(AttentionPattern(3, causal=True), global_projections=True)
    layer = LongformerDecoderLayer(args, LongformerAttentionConfig(AttentionPattern(3, causal=True),
                                                                   global_projections=False), no_encoder_attn=True)
    with pytest.raises(ValueError, match="padding"):
        layer(torch.randn(5, 1, HIDDEN), incremental_state={},
              self_attn_padding_mask=torch.tensor([[False, False, False, False, True]]))


@pytest.mark.parametrize("global_tokens,p_drop", [(False, 0.0), (True, 0.0), (True, 0.2)])
def test_module_through_triton_equals_torch_path(global_tokens, p_drop):
    """``auto`` picks Triton on CUDA: the module through the Triton kernel (interpreter here)
    equals the PyTorch path, outputs and every parameter's gradient, with dropout too."""
    torch.manual_seed(0)
    pattern = AttentionPattern(window=5, dilation=(1, 2))
    modules = {}
    for impl in ("torch", "triton"):
        torch.manual_seed(0)
        modules[impl] = LongformerSelfAttention(
            HIDDEN, HEADS, LongformerAttentionConfig(pattern, impl=impl, dropout=p_drop)).train()
    x = torch.randn(70, 2, HIDDEN)
    masks = masks_for(70) if global_tokens else AttentionMasks(padding=masks_for(70).padding)
    grad = torch.randn(70, 2, HIDDEN)
    results = {}
    for impl, module in modules.items():
        torch.manual_seed(7)  # the same dropout seed for both
        out, _ = module(x, key_padding_mask=masks)
        grads = torch.autograd.grad((out * grad).sum(), list(module.parameters()), allow_unused=True)
        results[impl] = (out, grads)
    torch.testing.assert_close(results["triton"][0], results["torch"][0], atol=2e-5, rtol=2e-5)
    for (name, _), a, b in zip(modules["torch"].named_parameters(), results["triton"][1], results["torch"][1]):
        torch.testing.assert_close(a, b, atol=5e-5, rtol=5e-5, msg=lambda m: f"grad {name}: {m}")


def test_model_through_triton_equals_torch_path():
    """The whole model built by fairseq with --attention-impl triton equals --attention-impl torch."""
    task = DictTask(positions=64)
    models = {}
    for impl in ("torch", "triton"):
        torch.manual_seed(0)
        models[impl] = build("longformer_base", task, max_positions=64, attention_window="4",
                             attention_impl=impl, **TINY)
    src = tokens(task, 2, 50)
    src[1, 40:] = task.source_dictionary.pad()
    is_global = torch.zeros_like(src, dtype=torch.bool)
    is_global[:, 0] = True
    outs = {}
    for impl, model in models.items():
        logits, _ = model(src, global_attention_mask=is_global)
        logits[:, ::7].logsumexp(-1).sum().backward()
        outs[impl] = logits
    torch.testing.assert_close(outs["triton"], outs["torch"], atol=1e-4, rtol=1e-4)
    for (name, a), b in zip(models["triton"].named_parameters(), models["torch"].parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=2e-4, rtol=2e-4, msg=lambda m: f"grad {name}: {m}")
