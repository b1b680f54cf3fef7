"""The attention core under torch.autocast (HF-style mixed precision, ``longformer-bench
train-steps``): it runs in autocast's dtype with autocast off, exactly as on inputs cast to that
dtype. Before, the PyTorch path with global keys died under bf16 autocast ("Input dtypes must be
the same" from the global keys' in-place baddbmm_)."""
import torch

from longformer_kernels import longformer_attention
from longformer_kernels.pattern import AttentionMasks, AttentionPattern


def test_bf16_autocast_with_global_tokens_equals_the_bf16_call():
    gen = torch.Generator().manual_seed(0)
    q, k, v, q_g, k_g, v_g = (torch.randn(2, 2, 40, 8, generator=gen) for _ in range(6))
    is_global = torch.zeros(2, 40, dtype=torch.bool)
    is_global[0, [0, 5]] = is_global[1, 0] = True
    masks = AttentionMasks(is_global=is_global)
    pattern = AttentionPattern(window=4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = longformer_attention(q, k, v, q_g, k_g, v_g, pattern, masks, impl="torch")
    want = longformer_attention(*(t.bfloat16() for t in (q, k, v, q_g, k_g, v_g)), pattern, masks, impl="torch")
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_module_with_global_tokens_trains_under_bf16_autocast():
    """The self-attention module (fp32 weights, global rows through the global projections) under
    CPU bf16 autocast: forward and backward run (before: the global rows' index_put met a bf16
    core output, their backward a bf16 gradient) and stay within bf16's rounding of the fp32 call."""
    from fairseq_longformer.modules.self_attention import LongformerAttentionConfig, LongformerSelfAttention
    from tests.plugin.modules.test_self_attention import HEADS, HIDDEN, masks_for

    torch.manual_seed(0)
    attn = LongformerSelfAttention(HIDDEN, HEADS, LongformerAttentionConfig(AttentionPattern(window=3), impl="torch"))
    x = torch.randn(30, 2, HIDDEN, requires_grad=True)
    weights = torch.randn(30, 2, HIDDEN)
    results = []
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = attn.attend(x, masks_for(30))
        x.grad = None
        (out.float() * weights).sum().backward()
        results.append((out.float().detach(), x.grad.clone()))
    for want, got in zip(results[0], results[1]):
        assert float((got - want).norm() / want.norm()) < 20 * 2.0 ** -8
