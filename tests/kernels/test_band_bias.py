"""The additive band bias (``band_bias``, "Band bias" in ``kernels/pattern.py``): the reference
against an independent dense computation in float64, the PyTorch path against the reference
(outputs and the gradients of q, k, v, q_g, k_g, v_g and the bias), and the rules: global rows
and global / padding / out-of-range columns get no bias and no bias gradient, and a bias of the
wrong shape, dtype or device is a clear error.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D); band_bias: (B, H, N, W), W = w + 1 (causal) or
2w + 1 (two-sided).
"""
import pytest
import torch

from longformer_kernels import (
    AttentionDropout, AttentionMasks, AttentionPattern, longformer_attention, reference_attention,
    sliding_chunks_attention,
)
from longformer_kernels.pattern import band_bias_width

# (N, w, dilation per head, causal, global tokens per row, padded positions in row 0)
GRID = [
    (1, 1, (1,), False, 0, 0),
    (2, 0, (1,), True, 0, 0),
    (37, 3, (1, 1, 2, 3), False, 3, 5),
    (37, 3, (1, 1, 2, 3), True, 0, 5),  # causal: no global tokens (refused)
    (30, 40, (1, 2), False, 1, 4),  # w >= N: every column beyond the sequence is ignored
    (200, 9, (1, 1, 2, 3), False, 4, 17),  # several chunks of the PyTorch path per head
    (200, 9, (1, 1, 2, 3), True, 0, 17),
    (20, 0, (1,), False, 1, 2),  # w = 0: W = 1, the query itself
    (21, 2, (1, 40), False, 1, 3),  # a dilation beyond N reaches only the query itself
]
NAMES = ("q", "k", "v", "q_g", "k_g", "v_g", "band_bias")


def make_inputs(batch, heads, length, head_dim, n_global, n_pad, pattern, dtype=torch.float64, seed=0):
    """Seven tensors needing gradients (q, k, v, q_g, k_g, v_g, band_bias) and the masks:
    padding at the end of row 0, a different number of global tokens per row."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, heads, length, head_dim)
    tensors = [torch.randn(shape, generator=gen, dtype=dtype) for _ in range(6)]
    tensors.append(torch.randn(batch, heads, length, band_bias_width(pattern), generator=gen, dtype=dtype) * 2)
    padding = torch.zeros(batch, length, dtype=torch.bool)
    if n_pad:
        padding[0, length - min(n_pad, length - 1):] = True
    is_global = torch.zeros(batch, length, dtype=torch.bool)
    for row in range(batch):
        is_global[row, torch.randperm(length, generator=gen)[:max(0, n_global - row)]] = True
    return [t.requires_grad_() for t in tensors], AttentionMasks(padding=padding, is_global=is_global)


def run(fn, tensors, pattern, masks, dropout=None, **kwargs):
    """fn's output and the gradients of all seven inputs under a fixed random dO."""
    *six, bias = tensors
    out = fn(*six, pattern, masks, dropout=dropout, band_bias=bias, **kwargs)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grad_out = grad_out.to(out.device, out.dtype)  # the same dO at every precision and device
    grads = torch.autograd.grad((out * grad_out).sum(), tensors, allow_unused=True)
    return out, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, tensors)]


def independent_dense(q, k, v, q_g, k_g, v_g, bias, pattern, masks):
    """Longformer attention with a band bias, written from the rules in pattern.py with no code
    of the package: per (b, h) an explicit (N, N) "allowed" matrix and an explicit (N, N) bias
    matrix, both filled by a plain loop over (i, j), then a dense masked softmax (float64)."""
    batch, heads, length, head_dim = q.shape
    w, dilations = pattern.window, pattern.dilation_per_head(heads)
    padding = masks.padding if masks.padding is not None else torch.zeros(batch, length, dtype=torch.bool)
    is_global = masks.is_global if masks.is_global is not None else torch.zeros(batch, length, dtype=torch.bool)
    is_global = is_global & ~padding
    rows_out = []
    for b in range(batch):
        heads_out = []
        for h in range(heads):
            d = dilations[h]
            allowed = torch.zeros(length, length, dtype=torch.bool)
            allowed_global_row = torch.zeros(length, length, dtype=torch.bool)
            bias_matrix = torch.zeros(length, length, dtype=q.dtype)
            bias_entries = []  # (i, j, c): the bias matrix is built from these, differentiably
            for i in range(length):
                if padding[b, i]:
                    continue
                for j in range(length):
                    if padding[b, j]:
                        continue
                    if is_global[b, i]:
                        allowed_global_row[i, j] = True
                        continue
                    if is_global[b, j]:
                        allowed[i, j] = True  # a global key: attended, never biased
                        continue
                    gap = j - i
                    if gap % d:
                        continue
                    steps = gap // d
                    if pattern.causal and -w <= steps <= 0:
                        allowed[i, j] = True
                        bias_entries.append((i, j, -steps))
                    elif not pattern.causal and -w <= steps <= w:
                        allowed[i, j] = True
                        bias_entries.append((i, j, steps + w))
            if bias_entries:
                i_s, j_s, c_s = (torch.tensor(x) for x in zip(*bias_entries))
                bias_matrix = bias_matrix.index_put((i_s, j_s), bias[b, h, i_s, c_s])
            scale = head_dim ** -0.5
            local = (q[b, h] @ k[b, h].T) * scale + bias_matrix
            glob = (q_g[b, h] @ k_g[b, h].T) * scale
            result = []
            for scores, ok, values in ((local, allowed, v[b, h]), (glob, allowed_global_row, v_g[b, h])):
                probs = torch.softmax(scores.masked_fill(~ok, float("-inf")), dim=-1)
                probs = torch.where(ok.any(-1, keepdim=True), probs, torch.zeros_like(probs))
                result.append(probs @ values)
            heads_out.append(torch.where(is_global[b][:, None], result[1], result[0]))
        rows_out.append(torch.stack(heads_out))
    return torch.stack(rows_out)


@pytest.mark.parametrize("length,window,dilation,causal,n_global,n_pad", [
    (23, 2, (1, 1, 2, 3), False, 3, 4),
    (23, 2, (1, 1, 2, 3), True, 0, 4),
    (9, 12, (1, 3), False, 1, 2),
])
def test_reference_matches_an_independent_dense_computation(length, window, dilation, causal, n_global, n_pad):
    pattern = AttentionPattern(window=window, dilation=dilation, causal=causal)
    tensors, masks = make_inputs(2, len(dilation), length, 4, n_global, n_pad, pattern)
    ref_out, ref_grads = run(reference_attention, tensors, pattern, masks)
    dense_out, dense_grads = run(lambda *a, dropout, band_bias: independent_dense(*a[:6], band_bias, *a[6:]),
                                 tensors, pattern, masks)
    torch.testing.assert_close(ref_out, dense_out, atol=1e-12, rtol=1e-12)
    for name, got, want in zip(NAMES, ref_grads, dense_grads):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12, msg=lambda m: f"grad {name}: {m}")
    assert ref_grads[6].abs().max() > 0.01  # the bias is really used


@pytest.mark.parametrize("p_drop", [0.0, 0.1])
@pytest.mark.parametrize("length,window,dilation,causal,n_global,n_pad", GRID)
def test_torch_path_matches_reference(length, window, dilation, causal, n_global, n_pad, p_drop):
    pattern = AttentionPattern(window=window, dilation=dilation, causal=causal)
    heads = len(dilation) if len(dilation) > 1 else 2
    tensors, masks = make_inputs(2, heads, length, 8, n_global, n_pad, pattern)
    dropout = AttentionDropout(p_drop, seed=length + 3) if p_drop else None
    ref_out, ref_grads = run(reference_attention, tensors, pattern, masks, dropout)
    out, grads = run(sliding_chunks_attention, tensors, pattern, masks, dropout)
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-10)
    for name, grad, ref in zip(NAMES, grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-10, rtol=1e-10, msg=lambda m: f"grad {name}: {m}")


def test_torch_path_without_global_rows_keeps_the_bias_of_every_other_row():
    """global_rows=False (the module computes the global rows itself): the other rows and the
    gradients of q, k, v and the bias through them are those of the full call."""
    pattern = AttentionPattern(window=4, dilation=(1, 2, 3))
    tensors, masks = make_inputs(2, 3, 60, 8, 3, 5, pattern)
    q, k, v, *_, bias = tensors
    local_rows = ~masks.is_global[:, None, :, None]
    full = sliding_chunks_attention(*tensors[:6], pattern, masks, band_bias=bias)
    skipped = sliding_chunks_attention(q, k, v, None, None, None, pattern, masks, global_rows=False,
                                       band_bias=bias)
    torch.testing.assert_close(skipped * local_rows, full * local_rows, atol=1e-12, rtol=0)
    grad_out = torch.randn(full.shape, dtype=full.dtype) * local_rows
    want = torch.autograd.grad((full * grad_out).sum(), (q, k, v, bias))
    got = torch.autograd.grad((skipped * grad_out).sum(), (q, k, v, bias))
    for name, a, b in zip(("q", "k", "v", "band_bias"), got, want):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=lambda m: f"grad {name}: {m}")


# bf16 keeps 8 significand bits to fp16's 11: 8x the fp16 tolerance
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_torch_path_low_precision(dtype, accelerator):
    """fp32 / fp16 / bf16 inputs (bias included), on the accelerator's device: the bias is added
    in fp32, the output close to the fp64 reference of the rounded inputs, the bias gradient in
    the bias's dtype."""
    assert dtype in accelerator.torch_dtypes
    pattern = AttentionPattern(window=5, dilation=(1, 1, 2, 3))
    tensors, masks = make_inputs(2, 4, 70, 16, 2, 6, pattern)
    low = [t.detach().to(accelerator.device, dtype).requires_grad_() for t in tensors]
    exact = [t.detach().cpu().double().requires_grad_() for t in low]
    ref_out, ref_grads = run(reference_attention, exact, pattern, masks)
    device = accelerator.device
    on_device = AttentionMasks(padding=masks.padding.to(device),
                               is_global=None if masks.is_global is None else masks.is_global.to(device))
    out, grads = run(sliding_chunks_attention, low, pattern, on_device)
    out, grads = out.cpu(), [g.cpu() for g in grads]
    assert out.dtype == dtype and grads[6].dtype == dtype
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.double(), ref_out, atol=tol, rtol=tol)
    for name, grad, ref in zip(NAMES, grads, ref_grads):
        torch.testing.assert_close(grad.double(), ref, atol=tol * 4, rtol=tol * 4, msg=lambda m: f"grad {name}: {m}")


@pytest.mark.parametrize("impl", ["reference", "torch"])
@pytest.mark.parametrize("causal", [False, True])
def test_ignored_entries_never_matter(impl, causal):
    """Columns whose key is outside the sequence, padding or global, and the rows of global and
    padding queries: any value there (even NaN) leaves the output unchanged, and their
    gradient is zero. Nearly every other entry gets a nonzero gradient (not all: a row whose
    only key is itself has a constant softmax)."""
    pattern = AttentionPattern(window=4, dilation=(1, 2), causal=causal)
    tensors, masks = make_inputs(2, 2, 40, 8, 0 if causal else 3, 6, pattern)
    *six, bias = tensors
    length, w = 40, 4
    used = torch.zeros(bias.shape, dtype=torch.bool)
    padding, is_global = masks.padding, masks.is_global
    is_global = torch.zeros_like(padding) if is_global is None else is_global
    for b in range(2):
        for h, d in enumerate(pattern.dilation_per_head(2)):
            for i in range(length):
                for c in range(bias.shape[-1]):
                    j = i - c * d if causal else i + (c - w) * d
                    used[b, h, i, c] = (not padding[b, i] and not is_global[b, i] and 0 <= j < length
                                        and not padding[b, j] and not is_global[b, j])
    assert (~used).sum() > 50 and used.sum() > 50
    fn = lambda *a, **kw: longformer_attention(*a, impl=impl, **kw)  # noqa: E731
    out, grads = run(fn, tensors, pattern, masks)
    assert (grads[6][~used] == 0).all()
    assert (grads[6][used] != 0).float().mean() > 0.9
    poisoned = bias.detach().masked_fill(~used, float("nan"))
    out_nan = longformer_attention(*six, pattern, masks, impl=impl, band_bias=poisoned)
    torch.testing.assert_close(out_nan, out.detach(), atol=1e-12, rtol=0)


def test_zero_bias_changes_nothing_and_a_constant_row_bias_cancels():
    """A zero bias is the unbiased attention; a bias constant along a row shifts all its band
    scores alike, which only cancels when the row has no global key (none here)."""
    pattern = AttentionPattern(window=3, dilation=(1, 2))
    tensors, masks = make_inputs(1, 2, 30, 8, 0, 3, pattern)
    six = tensors[:6]
    plain = sliding_chunks_attention(*six, pattern, masks)
    zero = sliding_chunks_attention(*six, pattern, masks, band_bias=torch.zeros_like(tensors[6]))
    torch.testing.assert_close(zero, plain, atol=1e-12, rtol=0)
    shift = torch.randn(1, 2, 30, 1, dtype=torch.float64).expand_as(tensors[6])
    torch.testing.assert_close(sliding_chunks_attention(*six, pattern, masks, band_bias=shift), plain,
                               atol=1e-12, rtol=0)


@pytest.mark.parametrize("impl", ["reference", "torch"])
def test_wrong_band_bias_is_a_clear_error(impl):
    pattern = AttentionPattern(window=3, causal=True)
    tensors, masks = make_inputs(1, 2, 20, 4, 0, 0, pattern)
    six = [t.detach() for t in tensors[:6]]
    with pytest.raises(ValueError, match=r"band_bias must have shape \(B, H, N, W\) = \(1, 2, 20, 4\) \(causal"):
        longformer_attention(*six, pattern, masks, impl=impl, band_bias=torch.zeros(1, 2, 20, 7, dtype=torch.float64))
    two_sided = AttentionPattern(window=3)
    with pytest.raises(ValueError, match=r"\(1, 2, 20, 7\) \(two-sided: W = 2w \+ 1"):
        longformer_attention(*six, two_sided, masks, impl=impl, band_bias=torch.zeros(1, 2, 20, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="dtype"):
        longformer_attention(*six, pattern, masks, impl=impl, band_bias=torch.zeros(1, 2, 20, 4))
