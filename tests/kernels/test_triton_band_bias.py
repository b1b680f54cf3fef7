"""The Triton kernels with a band bias (HAS_BIAS, "Band bias" in ``kernels/pattern.py``) against
the float64 reference: the output and the gradients of q, k, v, q_g, k_g, v_g and band_bias.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D); band_bias: (B, H, N, W), W = w + 1 (causal) or
2w + 1 (two-sided).

On a machine without CUDA this runs in Triton's interpreter (the root conftest.py sets
TRITON_INTERPRET=1), hence small shapes. Every bias given here holds NaN at the entries the
pattern ignores (keys outside the sequence, padding or global; rows of global and padding
queries): the output must not change and their gradient must be exactly zero. The tolerance is
the rule of ``test_triton_attention.py``: the error against the float64 reference at most twice
plain PyTorch's at the same dtype (dense, bias added in fp32, softmax in fp32), plus a floor.
"""
import os
from typing import Optional

import pytest
import torch

from tests.conftest import ACCELERATOR

from kernel_helpers import DEVICE, FLOOR, Case, case_masks, device_masks, forward_backward, random_inputs
from longformer_kernels.dropout import AttentionDropout, keep_matrix
from longformer_kernels.pattern import AttentionMasks, AttentionPattern, band_bias_width, default_scale
from longformer_kernels.reference import allowed_keys, dense_band_bias, reference_attention

assert os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available(), (
    "the root conftest.py sets TRITON_INTERPRET=1 on machines without CUDA")

import longformer_kernels.triton_attention as kernels  # noqa: E402
from longformer_kernels import triton_longformer_attention  # noqa: E402

NAMES = ("out", "dq", "dk", "dv", "dq_g", "dk_g", "dv_g", "dbias")
DROPOUT = AttentionDropout(p=0.1, seed=777)


CASES = [
    Case("causal_dil1123_padding", 2, 4, 97, window=4, dilation=(1, 1, 2, 3), causal=True,
         valid_lengths=[97, 80]),
    Case("dil1123_padding_globals", 2, 4, 97, window=4, dilation=(1, 1, 2, 3), causal=False,
         valid_lengths=[97, 70], global_positions=[[0, 10, 11, 60], [5, 96]]),  # 96: padding
    Case("window_beyond_n_dil12_one_global", 1, 2, 40, window=50, dilation=(1, 2), causal=False,
         valid_lengths=[33], global_positions=[[3]]),
]


def _used_entries(case: Case, pattern: AttentionPattern, masks: AttentionMasks) -> torch.Tensor:
    """(B, H, N, W) bool: the bias entries the pattern reads, by a plain loop over pattern.py's
    rule (local query i, key j = i + (c - w) d or i - c d in [0, N), neither padding nor global)."""
    padding = masks.padding
    is_global = torch.zeros_like(padding) if masks.is_global is None else masks.is_global
    width = band_bias_width(pattern)
    used = torch.zeros(case.batch, case.heads, case.length, width, dtype=torch.bool)
    for b in range(case.batch):
        for h, d in enumerate(pattern.dilation_per_head(case.heads)):
            for i in range(case.length):
                if padding[b, i] or is_global[b, i]:
                    continue
                for c in range(width):
                    j = i - c * d if pattern.causal else i + (c - pattern.window) * d
                    used[b, h, i, c] = 0 <= j < case.length and not padding[b, j] and not is_global[b, j]
    return used


def _plain_torch(q, k, v, q_g, k_g, v_g, bias, case: Case, pattern, masks, dropout):
    """Dense attention in the input dtype (scores, P @ V), the bias added in fp32 as an explicit
    (N, N) matrix per (b, h) (``dense_band_bias``), softmax in fp32."""
    padding = masks.padding
    is_global = torch.zeros_like(padding) if masks.is_global is None else masks.is_global & ~padding
    scale = default_scale(case.head_dim)
    if q_g is None:
        q_g, k_g, v_g = q, k, v
    keep = None if dropout is None else keep_matrix(dropout, case.batch, case.heads, case.length)
    out = []
    for b in range(case.batch):
        pad_b, glob_b = padding[b].tolist(), is_global[b].tolist()
        glob_allowed = (~padding[b]).expand(case.length, case.length) & is_global[b].unsqueeze(1)
        heads = []
        for h, d in enumerate(pattern.dilation_per_head(case.heads)):
            local_allowed = allowed_keys(pattern, d, pad_b, glob_b)
            dense = dense_band_bias(bias[b, h].float(), pattern, d, pad_b, glob_b)
            rows = []
            for qq, kk, vv, allowed, add in ((q, k, v, local_allowed, dense), (q_g, k_g, v_g, glob_allowed, 0.0)):
                scores = ((qq[b, h] @ kk[b, h].T) * scale).float() + add
                probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
                if keep is not None:
                    probs = torch.where(keep[b, h], probs * dropout.keep_scale, 0.0)
                rows.append(probs.to(vv.dtype) @ vv[b, h])
            heads.append(torch.where(is_global[b][:, None], rows[1], rows[0]))
        out.append(torch.stack(heads))
    return torch.stack(out)


def _check(case: Case, dtype: torch.dtype, dropout: Optional[AttentionDropout]):
    pattern = AttentionPattern(case.window, case.dilation, case.causal)
    masks = case_masks(case)
    used = _used_entries(case, pattern, masks)
    inputs, grad_out = random_inputs(case, dtype, bias_used=used)
    on_device = device_masks(masks)
    got = forward_backward(
        lambda *x: triton_longformer_attention(*x[:6], pattern, on_device, dropout=dropout, band_bias=x[6]),
        inputs, grad_out)
    want = forward_backward(
        lambda *x: reference_attention(*x[:6], pattern, masks, dropout=dropout, band_bias=x[6]),
        [None if t is None else t.double() for t in inputs], grad_out.double())
    plain = forward_backward(lambda *x: _plain_torch(*x, case, pattern, masks, dropout), inputs, grad_out)

    for name, result in zip(NAMES, got):
        assert result is None or torch.isfinite(result).all(), f"{name} has NaN/inf (a NaN bias entry was read?)"
    dbias = got[-1]
    assert dbias.dtype == dtype and (dbias[~used] == 0).all()
    assert (dbias[used] != 0).float().mean() > 0.9
    errors = {}
    for name, result, ref, base in zip(NAMES, got, want, plain):
        if result is None:
            continue
        err = (result.double() - ref).abs().max().item()
        base_err = (base.double() - ref).abs().max().item()
        # as in test_triton_attention.py: with dropout, gradients get 3x (FlashAttention's factor)
        factor = 3 if dropout is not None and name != "out" else 2
        assert err <= factor * base_err + FLOOR[dtype], (
            f"{name}: triton error {err:.3g} > {factor} * {base_err:.3g} + {FLOOR[dtype]:g}")
        errors[name] = err
    print(f"{case.name} {dtype} dropout={dropout is not None}: max error "
          + " ".join(f"{n}={e:.2g}" for n, e in errors.items()))


# the dtypes Triton runs in here: bf16 only on CUDA (the interpreter computes bf16 on the raw bits;
# on a CPU the PyTorch path is checked in bf16 instead, test_band_bias.py / test_production_configuration.py)
@pytest.mark.parametrize("dtype", ACCELERATOR.triton_dtypes, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_band_bias_matches_reference(case: Case, dtype: torch.dtype):
    _check(case, dtype, None)


@pytest.mark.parametrize("case", CASES[:2], ids=[c.name for c in CASES[:2]])
def test_band_bias_with_dropout(case: Case):
    _check(case, torch.float32, DROPOUT)


@pytest.mark.parametrize("dtype, head_dim", [(torch.float16, 128), (torch.float32, 16)],
                         ids=["fp16-d128-64x32", "fp32-d16-32x32"])
def test_band_bias_gpu_tiles(dtype, head_dim, monkeypatch):
    """The tiles a GPU gets, run here: BLOCK_M != BLOCK_N (64 x 32) for the transposed bias
    tile of the dk / dv kernel, and a band spanning several tiles."""
    monkeypatch.setenv(kernels.GPU_TILES_ENV, "1")
    case = Case("gpu_tiles", 1, 2, 150, window=40, dilation=(1, 2), causal=False,
                valid_lengths=[141], global_positions=[[7, 100]], head_dim=head_dim)
    _check(case, dtype, None)


def test_band_bias_launches_the_bias_variants(monkeypatch):
    """With a bias the three band kernels run HAS_BIAS=True; without, HAS_BIAS=False (the
    compiled kernels of before). The global-row kernels never take the flag."""
    launched = []
    real_launch = kernels._launch
    monkeypatch.setattr(kernels, "_launch", lambda kernel, grid, args, lay, **flags: (
        launched.append((kernel.fn.__name__, flags.get("HAS_BIAS"))), real_launch(kernel, grid, args, lay, **flags))[1])
    q = torch.randn(1, 2, 20, 16, device=DEVICE, requires_grad=True)
    bias = torch.zeros(1, 2, 20, 5, device=DEVICE, requires_grad=True)
    triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2), band_bias=bias).sum().backward()
    assert sorted(launched) == [("_band_bwd_dkdv_kernel", True), ("_band_bwd_dq_kernel", True),
                                ("_band_fwd_kernel", True), ("_delta_kernel", None)]
    launched.clear()
    triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2)).sum().backward()
    assert sorted(launched) == [("_band_bwd_dkdv_kernel", False), ("_band_bwd_dq_kernel", False),
                                ("_band_fwd_kernel", False), ("_delta_kernel", None)]
    configs = kernels.launch_configurations()
    assert sum(1 for c in configs if dict(c.flags).get("HAS_BIAS")) == 3 * 3 * 5 * 8  # kernels x dtypes x D x flags


def test_band_bias_wrong_shape_is_a_clear_error():
    q = torch.randn(1, 2, 20, 16, device=DEVICE)
    with pytest.raises(ValueError, match=r"band_bias must have shape \(B, H, N, W\) = \(1, 2, 20, 3\)"):
        triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2, causal=True),
                                    band_bias=torch.zeros(1, 2, 20, 5, device=DEVICE))
    with pytest.raises(ValueError, match="dtype"):
        triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2),
                                    band_bias=torch.zeros(1, 2, 20, 5, device=DEVICE, dtype=torch.float16))
    with pytest.raises(ValueError, match="scale must be nonzero"):
        triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2), scale=0.0,
                                    band_bias=torch.zeros(1, 2, 20, 5, device=DEVICE))
