"""The vectorized PyTorch path against the exact float64 reference: outputs and the gradients
of all six inputs, over a grid of awkward sizes and every feature of the pattern, with and
without attention dropout."""
import pytest
import torch

from longformer_kernels import (
    AttentionDropout, AttentionMasks, AttentionPattern, longformer_attention, reference_attention,
    sliding_chunks_attention,
)
from longformer_kernels.reference import allowed_keys

# (N, w, dilation per head, causal, global tokens per row, padded positions in row 0)
GRID = [
    (1, 1, (1,), False, 0, 0),
    (1, 4, (1, 2, 3), True, 0, 0),
    (97, 1, (1,), False, 0, 0),
    (97, 4, (1, 2, 3), False, 3, 5),
    (97, 4, (1, 2, 3), True, 0, 5),  # causal: no global tokens (refused, see test_causal_*)
    (97, 0, (1,), False, 2, 7),
    (33, 40, (1,), False, 1, 3),  # w >= N
    (50, 1, (2,), True, 0, 10),
    (64, 3, (1, 3, 2), False, 9, 0),  # many global tokens
    (1025, 16, (1,), False, 4, 100),
    (1025, 8, (1, 2, 3), True, 0, 0),
]


def make_inputs(batch, heads, length, head_dim, n_global, n_pad, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(batch, heads, length, head_dim, generator=gen, dtype=dtype).requires_grad_()
               for _ in range(6)]
    padding = torch.zeros(batch, length, dtype=torch.bool)
    if n_pad:
        padding[0, length - min(n_pad, length - 1):] = True
    is_global = torch.zeros(batch, length, dtype=torch.bool)
    for row in range(batch):
        count = max(0, n_global - row)  # a different count in every row
        is_global[row, torch.randperm(length, generator=gen)[:count]] = True
    if n_pad and n_global:
        is_global[0, -1] = True  # a global flag on a padding position: must be ignored
    return tensors, AttentionMasks(padding=padding, is_global=is_global)


def outputs_and_grads(fn, tensors, pattern, masks, dropout=None):
    out = fn(*tensors, pattern, masks, dropout=dropout)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    grads = torch.autograd.grad((out * grad_out).sum(), tensors, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, tensors)]
    return out, grads


@pytest.mark.parametrize("p_drop", [0.0, 0.1])
@pytest.mark.parametrize("length,window,dilation,causal,n_global,n_pad", GRID)
def test_torch_path_matches_reference(length, window, dilation, causal, n_global, n_pad, p_drop):
    heads = len(dilation) if len(dilation) > 1 else 2
    tensors, masks = make_inputs(2, heads, length, 8, n_global, n_pad)
    pattern = AttentionPattern(window=window, dilation=dilation, causal=causal)
    dropout = AttentionDropout(p_drop, seed=length + 7) if p_drop else None
    ref_out, ref_grads = outputs_and_grads(reference_attention, tensors, pattern, masks, dropout)
    out, grads = outputs_and_grads(sliding_chunks_attention, tensors, pattern, masks, dropout)
    assert torch.isfinite(out).all()
    # float64 in, float64 out on both sides: the only differences are summation order
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-10)
    for name, grad, ref in zip(("q", "k", "v", "q_g", "k_g", "v_g"), grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-10, rtol=1e-10, msg=lambda m: f"grad {name}: {m}")


@pytest.mark.parametrize("p_drop", [0.0, 0.1])
@pytest.mark.parametrize("length,window,dilation,n_global,n_pad,bound", [
    (97, 4, (1, 2, 3), 3, 5, 3),  # the bound is the largest count (row 1 has 2)
    (64, 3, (1, 3, 2), 9, 0, 12),  # slots beyond every row's count
    (20, 2, (1,), 2, 6, 50),  # beyond N: G = N
])
def test_torch_path_with_a_static_global_bound_matches_reference(length, window, dilation, n_global, n_pad,
                                                                 bound, p_drop):
    """``max_global_tokens`` (the global tensors sized by a bound, nothing read to the host, as
    under torch.compile): the unused slots change nothing, output or gradient."""
    tensors, masks = make_inputs(2, len(dilation), length, 8, n_global, n_pad)
    bounded = AttentionMasks(masks.padding, masks.is_global, max_global_tokens=bound)
    assert bounded.global_rows is None and bounded.max_global == min(bound, length)
    pattern = AttentionPattern(window=window, dilation=dilation)
    dropout = AttentionDropout(p_drop, seed=length + 7) if p_drop else None
    ref_out, ref_grads = outputs_and_grads(reference_attention, tensors, pattern, masks, dropout)
    out, grads = outputs_and_grads(sliding_chunks_attention, tensors, pattern, bounded, dropout)
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-10)
    for name, grad, ref in zip(("q", "k", "v", "q_g", "k_g", "v_g"), grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-10, rtol=1e-10, msg=lambda m: f"grad {name}: {m}")


def test_a_global_bound_below_a_rows_count_or_not_an_int_is_refused():
    _, masks = make_inputs(2, 2, 30, 4, 3, 0)  # rows of 3 and 2 global tokens
    with pytest.raises(RuntimeError, match="more global tokens than max_global_tokens=2"):
        AttentionMasks(masks.padding, masks.is_global, max_global_tokens=2)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="max_global_tokens must be an int >= 0"):
            AttentionMasks(masks.padding, masks.is_global, max_global_tokens=bad)


def test_torch_path_without_global_rows_keeps_every_other_row():
    """global_rows=False (the module computes those rows itself): every other row, and the
    gradients of q, k, v through them, are those of the full call; q_g, k_g, v_g are unread."""
    tensors, masks = make_inputs(2, 3, 97, 8, 3, 5)
    pattern = AttentionPattern(window=4, dilation=(1, 2, 3))
    local_rows = ~masks.is_global[:, None, :, None]
    full = sliding_chunks_attention(*tensors, pattern, masks)
    skipped = sliding_chunks_attention(*tensors[:3], None, None, None, pattern, masks, global_rows=False)
    torch.testing.assert_close(skipped * local_rows, full * local_rows, atol=1e-12, rtol=0)
    grad_out = torch.randn(full.shape, dtype=full.dtype) * local_rows
    want = torch.autograd.grad((full * grad_out).sum(), tensors[:3])
    got = torch.autograd.grad((skipped * grad_out).sum(), tensors[:3])
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=lambda m: f"grad {name}: {m}")


def dense_attention(q, k, v, q_g, k_g, v_g, pattern, masks):
    """Plain PyTorch at the inputs' precision: the Longformer pattern as a dense (N, N) mask per
    head (from the reference's rules), scores, softmax and products all in q's dtype."""
    batch, heads, length, head_dim = q.shape
    no = torch.zeros(batch, length, dtype=torch.bool)
    padding = no if masks.padding is None else masks.padding
    is_global = no if masks.is_global is None else masks.is_global
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            local = allowed_keys(pattern, pattern.dilation_per_head(heads)[h], padding[b].tolist(), is_global[b].tolist())
            glob = is_global[b][:, None] & ~padding[b][None, :]
            for qq, kk, vv, allowed in ((q, k, v, local), (q_g, k_g, v_g, glob)):
                scores = (qq[b, h] @ kk[b, h].T) * head_dim ** -0.5
                probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                probs = torch.where(allowed.any(-1, keepdim=True), probs, torch.zeros_like(probs))
                rows = allowed.any(-1)
                out[b, h, rows] = (probs @ vv[b, h])[rows]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_torch_path_low_precision_within_twice_torch_error(dtype, accelerator):
    """err(ours at dtype) <= 2 * err(dense PyTorch attention at dtype), both against the fp64
    reference (the rule of flash-attention's tests); ours on the accelerator's device."""
    assert dtype in accelerator.torch_dtypes
    tensors, masks = make_inputs(2, 3, 97, 16, 3, 5)
    pattern = AttentionPattern(window=6, dilation=(1, 2, 1))
    exact = reference_attention(*tensors, pattern, masks)
    low = [t.detach().to(dtype) for t in tensors]
    device = accelerator.device
    on_device = AttentionMasks(padding=masks.padding.to(device), is_global=masks.is_global.to(device))
    ours = sliding_chunks_attention(*(t.to(device) for t in low), pattern, on_device).cpu()
    assert ours.dtype == dtype
    baseline = (dense_attention(*low, pattern, masks).double() - exact).abs().max().item()
    err = (ours.double() - exact).abs().max().item()
    assert baseline > 0
    assert err <= 2 * baseline, (err, baseline)


def test_fp16_scores_beyond_fp16_range_stay_finite():
    """|q.k| > 65,504 overflows fp16; the softmax must still be right (computed in fp32)."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 40, 16, generator=gen) * 300
    k = torch.randn(1, 2, 40, 16, generator=gen) * 300
    v = torch.randn(1, 2, 40, 16, generator=gen)
    assert (q @ k.transpose(-1, -2)).abs().max() > 65504
    pattern = AttentionPattern(window=5)
    masks = AttentionMasks(is_global=torch.zeros(1, 40, dtype=torch.bool).index_fill_(1, torch.tensor([3]), True))
    exact = reference_attention(q, k, v, q, k, v, pattern, masks, scale=1.0)
    half = sliding_chunks_attention(*(t.half() for t in (q, k, v, q, k, v)), pattern, masks, scale=1.0)
    assert torch.isfinite(half).all()
    torch.testing.assert_close(half.float(), exact.float(), atol=5e-3, rtol=5e-3)


def test_padding_rows_are_zero_and_empty_rows_not_nan():
    tensors, masks = make_inputs(2, 2, 20, 4, 2, 6)
    pattern = AttentionPattern(window=2)
    out = sliding_chunks_attention(*tensors, pattern, masks)
    assert (out[0, :, masks.padding[0]] == 0).all()
    assert torch.isfinite(out).all()


def test_global_projections_optional_without_global_tokens():
    tensors, _ = make_inputs(1, 2, 30, 4, 0, 0)
    q, k, v = tensors[:3]
    pattern = AttentionPattern(window=3)
    out = longformer_attention(q, k, v, None, None, None, pattern, impl="torch")
    torch.testing.assert_close(out, reference_attention(q, k, v, None, None, None, pattern))
    with pytest.raises(ValueError, match="global"):
        longformer_attention(q, k, v, None, None, None, pattern,
                             AttentionMasks(is_global=torch.ones(1, 30, dtype=torch.bool)), impl="torch")


def test_auto_is_torch_on_cpu_and_names_are_checked():
    tensors, masks = make_inputs(1, 2, 30, 4, 1, 0)
    pattern = AttentionPattern(window=3)
    torch.testing.assert_close(longformer_attention(*tensors, pattern, masks),
                               sliding_chunks_attention(*tensors, pattern, masks))
    with pytest.raises(ValueError, match="implementation"):
        longformer_attention(*tensors, pattern, masks, impl="cuda-magic")


@pytest.mark.parametrize("kwargs,match", [
    (dict(window=-1), "window"),
    (dict(window=2, dilation=(0,)), "dilation"),
])
def test_bad_pattern_is_a_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AttentionPattern(**kwargs)


def test_bad_shapes_are_clear_errors():
    tensors, masks = make_inputs(1, 3, 30, 4, 0, 0)
    with pytest.raises(ValueError, match="one per head"):
        sliding_chunks_attention(*tensors, AttentionPattern(window=2, dilation=(1, 2)), masks)
    with pytest.raises(ValueError, match="shape"):
        sliding_chunks_attention(*tensors, AttentionPattern(window=2),
                                 AttentionMasks(padding=torch.zeros(1, 29, dtype=torch.bool)))
    with pytest.raises(ValueError, match="k must match q"):
        q, k, *rest = tensors
        sliding_chunks_attention(q, k[..., :2], *rest, AttentionPattern(window=2), masks)


@pytest.mark.parametrize("impl", ["reference", "torch"])
def test_causal_with_global_tokens_is_refused(impl):
    """Global attention is symmetric: under a causal pattern every earlier token would see the
    global one (the future). The combination is refused rather than leaking."""
    tensors, masks = make_inputs(1, 2, 12, 4, 1, 0)
    with pytest.raises(ValueError, match="causal"):
        longformer_attention(*tensors, AttentionPattern(window=3, causal=True), masks, impl=impl)


@pytest.mark.parametrize("impl", ["reference", "torch"])
def test_causal_output_never_depends_on_a_later_token(impl):
    """Output row i has zero gradient with respect to q, k, v of every position j > i."""
    q, k, v = (torch.randn(1, 3, 40, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    pattern = AttentionPattern(window=5, dilation=(1, 2, 3), causal=True)
    out = longformer_attention(q, k, v, None, None, None, pattern, impl=impl,
                               dropout=AttentionDropout(0.2, seed=3))
    for i in (0, 7, 21):
        grads = torch.autograd.grad(out[:, :, i].sum(), (q, k, v), retain_graph=True, allow_unused=True)
        for grad in grads:
            if grad is not None:
                assert (grad[:, :, i + 1:] == 0).all()
        assert sum(g[:, :, max(0, i - 5):i + 1].abs().sum() for g in grads) > 0  # it does see its window


def test_dropout_drops_the_expected_share_and_is_off_without_it():
    """The keep mask keeps about 1 - p of the entries, depends on the seed, and kept
    probabilities are scaled by 1 / (1 - p) (so each row's expected mass stays 1)."""
    from longformer_kernels.dropout import keep_matrix

    keep = keep_matrix(AttentionDropout(0.25, seed=11), 2, 3, 200)
    assert abs(keep.float().mean().item() - 0.75) < 0.01
    assert (keep != keep_matrix(AttentionDropout(0.25, seed=12), 2, 3, 200)).float().mean() > 0.3
    assert (keep_matrix(AttentionDropout(0.0, seed=11), 1, 1, 50)).all()
    tensors, masks = make_inputs(1, 2, 60, 8, 0, 0)
    pattern = AttentionPattern(window=60)
    plain = sliding_chunks_attention(*tensors, pattern, masks)
    dropped = sliding_chunks_attention(*tensors, pattern, masks, dropout=AttentionDropout(0.5, seed=1))
    assert not torch.allclose(plain, dropped)
    # v = 1 everywhere: each output is the row's kept probability mass, 1 in expectation
    ones = torch.ones_like(tensors[2])
    mass = sliding_chunks_attention(tensors[0], tensors[1], ones, None, None, None, pattern,
                                    dropout=AttentionDropout(0.5, seed=1))
    assert abs(mass.mean().item() - 1.0) < 0.05


def test_hash_matches_plain_python_integers():
    """The int32 hash of dropout.py equals lowbias32 computed with Python's unbounded ints."""
    from longformer_kernels.dropout import keep_mask, row_hash

    def mix(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    gen = torch.Generator().manual_seed(0)
    cases = torch.randint(0, 2 ** 15, (200, 4), generator=gen)
    seed = 2 ** 31 - 5
    dropout = AttentionDropout(0.3, seed=seed)
    got = keep_mask(dropout, *cases.T)
    rows = row_hash(seed, *cases[:, :3].T)
    for (b, h, i, j), keep, row in zip(cases.tolist(), got.tolist(), rows.tolist()):
        want_row = mix(mix(mix(seed ^ b) ^ h) ^ i)
        assert row & 0xFFFFFFFF == want_row
        draw = (mix(want_row ^ (j >> 2)) >> (8 * (j & 3))) & 0xFF  # byte j % 4 of word j // 4
        assert keep == (draw >= dropout.threshold)
