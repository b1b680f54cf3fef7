"""Triton Longformer attention against the float64 reference: outputs and all six gradients.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D); padding / global masks: (B, N).

On a machine without CUDA the kernels run in Triton's CPU interpreter: the root conftest.py
sets TRITON_INTERPRET=1 before ``longformer_kernels`` is imported, so nothing here is skipped.
The interpreter is slow, hence small shapes, D = 16 and 32 x 32 tiles there (``block_config``):
N = 97, 150 and 1025 still span 4, 5 and 33 query/key blocks, and 39 global tokens span two tiles.
``test_unequal_query_and_key_blocks`` covers BLOCK_M != BLOCK_N, as used on GPUs for D > 64, and
``test_gpu_tiles`` runs the tiles ``block_config`` picks for GPUs (64 x 64, 64 x 32) here too.
Every case runs with and without attention dropout (in the interpreter the N = 300 cases without
dropout in fp32 only, see ``_grid``) (the same ``AttentionDropout`` for Triton,
the reference and the plain-PyTorch baseline), so the dropout hash is checked through the
whole forward and backward, not only by ``test_dropout_hash_matches_torch``.

Tolerance (design.md, convention 6): the error of the Triton output or gradient against the
float64 reference must be at most twice the error of plain PyTorch at the same dtype (dense
attention, scores and P @ V in that dtype, softmax in fp32, as FlashAttention's tests do), plus
a small absolute floor.
"""
import dataclasses
import os
from typing import Optional

import pytest
import torch

from tests.conftest import ACCELERATOR

from kernel_helpers import (DEVICE, FLOOR, HEAD_DIM, Case, case_masks, device_masks, forward_backward,
                            random_inputs)
from longformer_kernels.dropout import AttentionDropout, keep_from_rows, keep_mask, keep_matrix, mix32, row_hash
from longformer_kernels.pattern import AttentionMasks, AttentionPattern, default_scale
from longformer_kernels.reference import allowed_keys, reference_attention

assert os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available(), (
    "the root conftest.py sets TRITON_INTERPRET=1 on machines without CUDA")

import triton  # noqa: E402  (after the env check: the interpreter is chosen at decoration)
import triton.language as tl  # noqa: E402

import longformer_kernels.triton_attention as kernels  # noqa: E402
from longformer_kernels import triton_longformer_attention  # noqa: E402

NAMES = ("out", "dq", "dk", "dv", "dq_g", "dk_g", "dv_g")
DROPOUT = AttentionDropout(p=0.1, seed=20240917)


CASES = [
    Case("n1", 1, 1, 1, window=1),
    Case("n1_global_one_row", 2, 1, 1, window=0, global_positions=[[0], []]),
    Case("n97_w1_dil123_padding", 2, 3, 97, window=1, dilation=(1, 2, 3), valid_lengths=[97, 80]),
    Case("n97_w0_many_globals", 2, 2, 97, window=0, valid_lengths=[97, 85],
         global_positions=[[0, 1, 50, 96], [3, 40, 90]]),  # 90 is padding: ignored
    Case("n97_window_beyond_n_one_global", 2, 1, 97, window=120, valid_lengths=[97, 60],
         global_positions=[[0], [0]], scale=0.3),
    Case("n97_causal_dil123_padding", 2, 3, 97, window=4, dilation=(1, 2, 3), causal=True,
         valid_lengths=[97, 70]),
    Case("n97_dil123_globals", 2, 3, 97, window=4, dilation=(1, 2, 3),
         valid_lengths=[97, 70], global_positions=[[0, 10, 11, 60], [96]]),  # row 1: none left
    Case("n97_dil123_globals_static_bound", 2, 3, 97, window=4, dilation=(1, 2, 3),  # G = 7 > 4
         valid_lengths=[97, 70], global_positions=[[0, 10, 11, 60], [5]], max_global_tokens=7),
    Case("n150_five_blocks_39_globals", 2, 3, 150, window=20, dilation=(1, 2, 3),
         valid_lengths=[150, 140],
         global_positions=[list(range(0, 150, 4)) + [149], [5, 149]]),  # 39 globals > one tile
    Case("n1025_causal_dil123_padding", 1, 3, 1025, window=8, dilation=(1, 2, 3), causal=True,
         valid_lengths=[1000]),  # 33 blocks
    Case("n1025_dil123_padding_globals", 1, 3, 1025, window=8, dilation=(1, 2, 3),
         valid_lengths=[1000], global_positions=[[0, 511, 1010]]),  # 1010 is padding
    Case("all_padding_row_dilation_beyond_n", 2, 2, 21, window=2, dilation=(1, 40),
         valid_lengths=[21, 0], global_positions=[[3], [4]]),
    # Windows wider than two tiles: interior tiles (run without a mask) beside edge tiles that
    # straddle the window edges, the sequence end, padding, global tokens and residue boundaries,
    # and key tiles of padding only (skipped).
    Case("n300_interior_dil123_padding_globals", 2, 3, 300, window=80, dilation=(1, 2, 3),
         valid_lengths=[300, 203], global_positions=[[0, 150], [40]]),
    Case("n300_interior_causal_dil12_padding", 2, 2, 300, window=70, dilation=(1, 2), causal=True,
         valid_lengths=[300, 131]),
]


def _dense_masks(case: Case, masks: AttentionMasks):
    """(B, H, N, N) local and global "may attend" matrices, from the reference's own rules."""
    pattern = AttentionPattern(case.window, case.dilation, case.causal)
    no = torch.zeros(case.batch, case.length, dtype=torch.bool)
    padding = no if masks.padding is None else masks.padding
    is_global = no if masks.is_global is None else masks.is_global & ~padding
    local, glob = [], []
    for b in range(case.batch):
        local.append(torch.stack([
            allowed_keys(pattern, d, padding[b].tolist(), is_global[b].tolist())
            for d in pattern.dilation_per_head(case.heads)]))
        glob.append((~padding[b]).expand(case.length, case.length) & is_global[b].unsqueeze(1))
    glob = torch.stack(glob).unsqueeze(1).expand(-1, case.heads, -1, -1)
    return torch.stack(local), glob, is_global


def _plain_torch(q, k, v, q_g, k_g, v_g, case: Case, dense, dropout=None) -> torch.Tensor:
    """Dense attention with scores and P @ V in the input dtype, softmax in fp32."""
    local, glob, is_global = dense
    scale = default_scale(case.head_dim) if case.scale is None else case.scale
    if q_g is None:
        q_g, k_g, v_g = q, k, v
    keep = None if dropout is None else keep_matrix(dropout, case.batch, case.heads, case.length)

    def attend(q, k, v, allowed):
        scores = (q @ k.transpose(-1, -2)) * scale
        scores = scores.float().masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        if keep is not None:
            probs = torch.where(keep, probs * dropout.keep_scale, 0.0)
        return probs.to(v.dtype) @ v

    out_local = attend(q, k, v, local)
    out_global = attend(q_g, k_g, v_g, glob)
    return torch.where(is_global[:, None, :, None], out_global, out_local)


def _max_errors(results, reference):
    return [None if r is None else (r.double() - ref).abs().max().item()
            for r, ref in zip(results, reference)]


def _check_against_reference(case: Case, dtype: torch.dtype, dropout: Optional[AttentionDropout]):
    """Triton's output and six gradients within twice plain PyTorch's error of the reference."""
    pattern = AttentionPattern(case.window, case.dilation, case.causal)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, dtype)
    on_device = device_masks(masks)

    triton_results = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, on_device, scale=case.scale,
                                               dropout=dropout),
        inputs, grad_out)
    # float64 oracle on exactly the (rounded) inputs the implementations saw
    reference = forward_backward(
        lambda *x: reference_attention(*x, pattern, masks, scale=case.scale, dropout=dropout),
        [None if t is None else t.double().cpu() for t in inputs], grad_out.double())
    dense = _dense_masks(case, masks)
    plain = forward_backward(lambda *x: _plain_torch(*x, case, dense, dropout),
                             [None if t is None else t.cpu() for t in inputs], grad_out.cpu())

    assert triton_results[0].dtype == dtype and triton_results[0].shape == inputs[0].shape
    for name, result in zip(NAMES, triton_results):
        assert result is None or torch.isfinite(result).all(), f"{name} has NaN/inf"
    triton_err = _max_errors(triton_results, reference)
    plain_err = _max_errors(plain, reference)
    # The softmax backward's delta = rowsum(dO * O) is taken, as in FlashAttention, from the
    # output as stored, rounded to the input dtype; plain autograd never rounds O there. The
    # gradients through dS (dq, dk, dq_g, dk_g) may differ from the reference by that rounding:
    # eps * max |dO| |O| per row, times |k| * scale. (With one key and no dropout O is v itself
    # and the rounding exact; with dropout O = v / (1 - p) is rounded.)
    scale = default_scale(case.head_dim) if case.scale is None else case.scale
    row_mass = (grad_out.double().cpu().abs() * reference[0].abs()).sum(-1).max().item()
    key_size = max(t.double().abs().max().item() for t in inputs if t is not None)
    delta_rounding = torch.finfo(dtype).eps * row_mass * key_size * scale
    for name, err, base in zip(NAMES, triton_err, plain_err):
        if err is None:
            continue
        # With dropout the kept probabilities are scaled by 1 / (1 - p) after rounding to the
        # input dtype and the fp16 gradients came out up to 2.4x plain PyTorch's error (six
        # input seeds of the smallest case): gradients then get 3x, the factor FlashAttention's
        # own tests allow for dq, dk, dv (tests/test_flash_attn.py); outputs keep 2x.
        factor = 3 if dropout is not None and name != "out" else 2
        bound = factor * base + FLOOR[dtype]
        if name in ("dq", "dk", "dq_g", "dk_g"):
            bound += delta_rounding
        assert err <= bound, (f"{name}: triton error {err:.3g} > {factor} * {base:.3g} + "
                              f"{FLOOR[dtype]:g}")
    print(f"{case.name} {dtype} dropout={dropout is not None}: max error "
          + " ".join(f"{n}={e:.2g}" for n, e in zip(NAMES, triton_err) if e is not None))

    if masks.padding is not None:  # padding rows are exactly zero
        padded = masks.padding[:, None, :, None].expand_as(triton_results[0])
        assert (triton_results[0][padded] == 0).all()


# Every case with and without dropout, in every dtype Triton runs in here (bf16 only on CUDA: the
# interpreter computes bf16 on the raw bits; on a CPU the PyTorch path is checked in bf16 instead,
# test_band_bias.py / test_production_configuration.py). The kernels compile a variant per dtype
# and per DROPOUT constexpr, so the N = 300 cases' interior tiles (which run without a mask) are
# checked with and without dropout. One combination is left to the GPU: in the interpreter, where
# an N = 300 case takes 10-20 s, the interior tiles without dropout run in fp32 only; fp16 reaches
# the same interior code with dropout, and the undropped fp16 path at N <= 150.
def _grid():
    for case in CASES:
        for dropout in (None, DROPOUT):
            for dtype in ACCELERATOR.triton_dtypes:
                if ACCELERATOR.interpreter and case.length >= 300 and dropout is None and dtype != torch.float32:
                    continue
                name = case.name + ("-dropout" if dropout else "") + "-" + str(dtype).split(".")[-1]
                yield pytest.param(case, dropout, dtype, id=name)


@pytest.mark.parametrize("case, dropout, dtype", list(_grid()))
def test_matches_reference(case: Case, dropout: Optional[AttentionDropout], dtype: torch.dtype):
    _check_against_reference(case, dtype, dropout)


GPU_TILE_CASES = [
    Case("gpu_tiles_dil12_padding_globals", 2, 2, 150, window=40, dilation=(1, 2),
         valid_lengths=[150, 131], global_positions=[list(range(0, 150, 2)), [7, 130]]),
    Case("gpu_tiles_causal_dil12", 1, 2, 150, window=70, dilation=(2, 1), causal=True,
         valid_lengths=[140]),
]


@pytest.mark.parametrize("dtype, head_dim", [(torch.float16, 16), (torch.float16, 128),
                                             (torch.float32, 16), (torch.float32, 128)],
                         ids=["fp16-d16", "fp16-d128", "fp32-d16", "fp32-d128"])
@pytest.mark.parametrize("case", GPU_TILE_CASES, ids=[c.name for c in GPU_TILE_CASES])
def test_gpu_tiles(case: Case, dtype: torch.dtype, head_dim: int, monkeypatch):
    """The tiles block_config picks for a GPU, per kernel, run in the interpreter (fp16 at
    D <= 64: 64 x 32 band forward and dq, 32 x 64 dk/dv, 64 x 128 global rows, else 64 x 64;
    64 x 32 for D = 128; fp32: 32 x 32, 16 x 16): more global tokens than a 64-slot tile, a band
    wider than a tile, a causal band, dilation, with dropout."""
    monkeypatch.setenv(kernels.GPU_TILES_ENV, "1")
    case = dataclasses.replace(case, head_dim=head_dim)
    element_size = torch.empty((), dtype=dtype).element_size()
    launched = []
    real_launch = kernels._launch
    monkeypatch.setattr(kernels, "_launch", lambda kernel, grid, args, lay, **flags: (
        launched.append((kernel.fn.__name__, lay.configs[kernel.fn.__name__])),
        real_launch(kernel, grid, args, lay, **flags))[1])
    _check_against_reference(case, dtype, DROPOUT)
    assert launched
    for name, config in launched:
        assert config == kernels.block_config(head_dim, element_size, False, name), (name, config)


def test_causal_global_refused(accelerator):
    q = torch.randn(1, 1, 8, HEAD_DIM, device=accelerator.device)
    is_global = torch.zeros(1, 8, dtype=torch.bool)
    is_global[0, 3] = True
    with pytest.raises(ValueError, match="causal"):
        triton_longformer_attention(q, q, q, q, q, q, AttentionPattern(2, causal=True),
                                    AttentionMasks(is_global=is_global))


# ----------------------------------------------------------------------------------------------
# The dropout hash, alone: the Triton functions against dropout.py's torch definition
# ----------------------------------------------------------------------------------------------
@triton.jit
def _hash_probe_kernel(MIXED, KEEP, X, SEED, B, H, I, J, threshold, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(X + offs, mask=ok, other=0).to(tl.uint32)
    tl.store(MIXED + offs, kernels._mix32(x).to(tl.int64), mask=ok)
    seed = tl.load(SEED + offs, mask=ok, other=0)
    rows = kernels._row_hash(seed, tl.load(B + offs, mask=ok, other=0),
                             tl.load(H + offs, mask=ok, other=0),
                             tl.load(I + offs, mask=ok, other=0), True)
    draws = kernels._draws(rows, tl.load(J + offs, mask=ok, other=0))
    tl.store(KEEP + offs, tl.where(draws >= threshold, 1.0, 0.0), mask=ok)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_hash_matches_torch(p):
    """mix32 on uint32 edge values, and the keep mask on a grid of (seed, b, h, i, j) with large
    seeds and positions, bit for bit against dropout.py."""
    values = [0, 1, 2, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0x846CA68B, 0xFFFFFFFE,
              0xFFFFFFFF]
    seeds = [0, 1, 16, 12345, 2 ** 31 - 1]
    positions = [0, 1, 2, 15, 16, 1023, 4097, 65535, 2 ** 20 + 3, 2 ** 31 - 1]
    grid = torch.cartesian_prod(torch.tensor(seeds), torch.tensor([0, 1, 5]),
                                   torch.tensor([0, 3, 11]), torch.tensor(positions),
                                   torch.tensor(positions))
    x = torch.tensor(values + [0] * (len(grid) - len(values)), dtype=torch.int64)
    seed, b, h, i, j = (grid[:, c].to(torch.int32).contiguous() for c in range(5))
    dropout = AttentionDropout(p, seed=0)  # only its threshold is used: seeds vary per entry
    mixed = torch.empty(len(grid), dtype=torch.int64, device=DEVICE)
    keep = torch.empty(len(grid), dtype=torch.float32, device=DEVICE)
    block = 1024
    _hash_probe_kernel[(triton.cdiv(len(grid), block),)](
        mixed, keep, *(t.to(DEVICE) for t in (x, seed, b, h, i, j)), dropout.threshold,
        len(grid), BLOCK=block)
    # dropout.py's mix32 works on int32 bit patterns of the uint32 values
    patterns = x[:len(values)].to(torch.int32)  # wraps values >= 2^31 to their bit pattern
    assert mixed[:len(values)].cpu().tolist() == (mix32(patterns).long() & 0xFFFFFFFF).tolist()
    expected = torch.zeros(len(grid), dtype=torch.bool)
    for s in seeds:
        at = seed == s
        expected[at] = keep_mask(AttentionDropout(p, s), b[at], h[at], i[at], j[at])
    assert torch.equal(keep.cpu() != 0, expected)
    assert abs(expected.float().mean().item() - (1 - p)) < 0.05


@triton.jit
def _weights_probe_kernel(OUT, OUT_T, OUT_SCATTERED, ROWS, KEYS, first, threshold, keep_scale,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    rows = tl.load(ROWS + offs_m).to(tl.uint32)
    keys = tl.load(KEYS + offs_n)
    grid = offs_m[:, None] * BLOCK_N + offs_n[None, :]
    grid_t = offs_n[:, None] * BLOCK_M + offs_m[None, :]
    tl.store(OUT + grid, kernels._key_weights(rows, keys, first, threshold, keep_scale, True, False,
                                              False, BLOCK_N))
    tl.store(OUT_T + grid_t, kernels._key_weights(rows, keys, first, threshold, keep_scale, True,
                                                  False, True, BLOCK_N))
    tl.store(OUT_SCATTERED + grid_t, kernels._key_weights(rows, keys, first, threshold, keep_scale,
                                                          True, True, True, BLOCK_N))


@pytest.mark.parametrize("first", [0, 64, 4096 + 32])
def test_dropout_weights_of_consecutive_and_scattered_keys(first):
    """The kernels' one-hash-per-four-keys tile (bytes interleaved back into key order), in both
    orientations, and the per-entry tile of keys in any order, against dropout.py."""
    dropout = AttentionDropout(0.3, seed=4242)
    rows = row_hash(dropout.seed, torch.tensor(1), torch.tensor(2), torch.arange(16) * 7 + 3)
    keys = torch.arange(first, first + 32)
    shuffled = keys[torch.randperm(32, generator=torch.Generator().manual_seed(0))]
    expected = torch.where(keep_from_rows(rows[:, None], keys, dropout), dropout.keep_scale, 0.0).float()
    out = torch.empty(16, 32, device=DEVICE)
    out_t, out_scattered = torch.empty(32, 16, device=DEVICE), torch.empty(32, 16, device=DEVICE)
    _weights_probe_kernel[(1,)](out, out_t, out_scattered, rows.to(DEVICE), keys.to(DEVICE), first,
                                dropout.threshold, dropout.keep_scale, BLOCK_M=16, BLOCK_N=32)
    torch.testing.assert_close(out.cpu(), expected, atol=0, rtol=0)
    torch.testing.assert_close(out_t.cpu(), expected.T, atol=0, rtol=0)
    # scattered keys: the key order given, one hash each
    _weights_probe_kernel[(1,)](out, out_t, out_scattered, rows.to(DEVICE), shuffled.to(DEVICE), first,
                                dropout.threshold, dropout.keep_scale, BLOCK_M=16, BLOCK_N=32)
    want = torch.where(keep_from_rows(rows[:, None], shuffled, dropout), dropout.keep_scale, 0.0).float()
    torch.testing.assert_close(out_scattered.cpu(), want.T, atol=0, rtol=0)


# ----------------------------------------------------------------------------------------------
# What the launcher computes, and in which layout
# ----------------------------------------------------------------------------------------------
def _record_launches(monkeypatch):
    launched = []
    real_launch = kernels._launch

    def record(kernel, grid, args, lay, **flags):
        launched.append(kernel.fn.__name__ + "".join(f" {k}" for k in sorted(flags) if flags[k]))
        return real_launch(kernel, grid, args, lay, **flags)

    monkeypatch.setattr(kernels, "_launch", record)
    return launched


STRIDED_CASE = Case("strided", 2, 2, 29, window=3, dilation=(2, 1), valid_lengths=[29, 25],
                    global_positions=[[1], [7, 8]])


def test_strided_inputs_match_contiguous(accelerator):
    """The module's layout: (B, H, N, D) views of (N, B, H, D) tensors, strides (H*D, D, B*H*D,
    1), run without copies and give out and grads in that layout, equal to the contiguous call."""
    case = STRIDED_CASE
    pattern = AttentionPattern(case.window, case.dilation)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, torch.float32)
    strided = [t.to(accelerator.device).permute(2, 0, 1, 3).contiguous().permute(1, 2, 0, 3) for t in inputs]
    assert strided[0].stride() == (2 * HEAD_DIM, HEAD_DIM, 4 * HEAD_DIM, 1)
    leaves = [t.detach().requires_grad_() for t in strided]
    out = triton_longformer_attention(*leaves, pattern, masks, dropout=DROPOUT)
    out.backward(grad_out.to(accelerator.device))
    assert out.stride() == strided[0].stride()
    for leaf in leaves:
        assert leaf.grad.stride() == strided[0].stride()
    contiguous = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, masks, dropout=DROPOUT), inputs, grad_out)
    for name, a, b in zip(NAMES, [out.detach().cpu()] + [t.grad.cpu() for t in leaves], contiguous):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    # mixed layouts: k transposed the other way, the global family contiguous, odd grad_out
    mixed = [strided[0].cpu(), inputs[1].transpose(1, 2).contiguous().transpose(1, 2), strided[2].cpu(),
             *inputs[3:]]
    results = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, masks, dropout=DROPOUT),
        mixed, grad_out.transpose(0, 3).contiguous().transpose(0, 3))
    for name, a, b in zip(NAMES, results, contiguous):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


@pytest.mark.parametrize("dropout", [None, DROPOUT], ids=["", "dropout"])
def test_without_global_rows(dropout, monkeypatch, accelerator):
    """global_rows=False, q_g = k_g = v_g = None: the local rows and dq, dk, dv of the full call,
    zeros in the global rows, and no global-row kernel run (forward or backward)."""
    case = STRIDED_CASE
    pattern = AttentionPattern(case.window, case.dilation)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, torch.float32)
    full = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, masks, dropout=dropout), inputs, grad_out)
    launched = _record_launches(monkeypatch)
    local = forward_backward(
        lambda *x: triton_longformer_attention(*x, None, None, None, pattern, masks,
                                               global_rows=False, dropout=dropout),
        inputs[:3], grad_out)
    is_global = masks.is_global[:, None, :, None].expand_as(full[0])
    torch.testing.assert_close(local[0][~is_global], full[0][~is_global], atol=0, rtol=0)
    assert (local[0][is_global] == 0).all()
    for name, a, b in zip(NAMES[1:4], local[1:4], full[1:4]):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    drop = " DROPOUT" if dropout is not None else ""
    band = " DILATED" + drop  # head 0 has dilation 2 (flags in alphabetical order)
    # the global keys' dk, dv from the local queries, in chunk parts added by _sum_rows_kernel
    assert launched == ["_band_fwd_kernel" + band, "_delta_kernel", "_band_bwd_dq_kernel" + band,
                        "_band_bwd_dkdv_kernel" + band, "_cross_bwd_dkdv_kernel" + drop + " GLOBAL_KEYS",
                        "_sum_rows_kernel", "_sum_rows_kernel"]
    # stand-ins for the global projections (as the module passes) get no gradient either
    leaves = [t.detach().to(accelerator.device).requires_grad_() for t in inputs]
    triton_longformer_attention(*leaves, pattern, masks, global_rows=False).backward(grad_out.to(accelerator.device))
    assert all(t.grad is None for t in leaves[3:])


FORWARD = ["_band_fwd_kernel DILATED", "_global_rows_fwd_kernel", "_global_rows_combine_kernel"]


@pytest.mark.parametrize("wanted, kernels_run", [
    ("q", FORWARD + ["_delta_kernel", "_band_bwd_dq_kernel DILATED"]),
    ("kv", FORWARD + ["_delta_kernel", "_band_bwd_dkdv_kernel DILATED", "_cross_bwd_dkdv_kernel GLOBAL_KEYS",
                      "_sum_rows_kernel", "_sum_rows_kernel"]),
    ("q_g", FORWARD + ["_delta_kernel", "_global_rows_bwd_dq_kernel", "_sum_rows_kernel"]),
    ("v_g", FORWARD + ["_delta_kernel", "_cross_bwd_dkdv_kernel"]),
])
def test_only_requested_gradients(wanted, kernels_run, monkeypatch, accelerator):
    """Inputs with requires_grad=False get None, and kernels computing only their gradients do
    not run; the requested gradients equal those of the full call."""
    case = STRIDED_CASE
    pattern = AttentionPattern(case.window, case.dilation)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, torch.float32)
    full = forward_backward(lambda *x: triton_longformer_attention(*x, pattern, masks),
                            inputs, grad_out)
    names = {"q": ["q"], "kv": ["k", "v"], "q_g": ["q_g"], "v_g": ["v_g"]}[wanted]
    leaves = [t.detach().to(accelerator.device).requires_grad_(name in names)
              for name, t in zip(("q", "k", "v", "q_g", "k_g", "v_g"), inputs)]
    launched = _record_launches(monkeypatch)
    triton_longformer_attention(*leaves, pattern, masks).backward(grad_out.to(accelerator.device))
    assert launched == kernels_run
    for name, leaf, expected in zip(NAMES[1:], leaves, full[1:]):
        if leaf.requires_grad:
            torch.testing.assert_close(leaf.grad.cpu(), expected, atol=0, rtol=0, msg=name)
        else:
            assert leaf.grad is None, name


def test_launcher_refuses_unlisted_configuration(monkeypatch, accelerator):
    """The launchers can only run what launch_configurations() lists (and the compile test
    compiles): a block_config outside it is refused."""
    kernels._known_configs(True)  # the list as block_config gives it (cached) before the patch
    monkeypatch.setattr(kernels, "block_config", lambda *args: kernels.BlockConfig(16, 64, 16, 1, 1))
    q = torch.randn(1, 1, 8, HEAD_DIM, device=accelerator.device)
    with pytest.raises(RuntimeError, match="not in launch_configurations"):
        triton_longformer_attention(q, q, q, None, None, None, AttentionPattern(2))


def test_position_tensors_are_made_once_per_masks(accelerator):
    """The layers of a forward share one AttentionMasks: the kinds and global index lists the
    kernels read are made by the first call and reused (the same tensors), per shape and
    device; at most 8 shapes are kept (the shared default masks see every shape)."""
    masks = AttentionMasks(padding=torch.tensor([[False] * 20 + [True] * 4]),
                           is_global=torch.tensor([[True] + [False] * 23]))
    q = torch.randn(1, 2, 24, HEAD_DIM, device=accelerator.device)
    first = kernels._build_layout(q, AttentionPattern(3), masks, 1.0, None)
    again = kernels._build_layout(q, AttentionPattern(5, (1, 2)), masks, 0.5, None)
    assert again.kind is first.kind and again.gidx is first.gidx and again.gcount is first.gcount
    assert first.kind.tolist() == [[int(kernels.GLOBAL.value)] + [int(kernels.LOCAL.value)] * 19
                                   + [int(kernels.PAD.value)] * 4]
    shared = AttentionMasks()
    layouts = [kernels._build_layout(torch.randn(1, 1, n, HEAD_DIM, device=accelerator.device), AttentionPattern(2),
                                     shared, 1.0, None) for n in range(1, 11)]
    assert len(shared._derived) == 8 and all(lay.kind.shape == (1, n) for n, lay in enumerate(layouts, 1))


def test_fp16_scores_beyond_fp16_range_stay_finite():
    """|q.k| ~ 1e5 > 65504: the dot must accumulate and be scaled in fp32."""
    case = Case("overflow", 1, 2, 40, window=3, global_positions=[[0, 17]])
    pattern = AttentionPattern(case.window)
    masks = case_masks(case)
    generator = torch.Generator().manual_seed(1)
    shape = (1, 2, 40, HEAD_DIM)
    big = lambda: (torch.randn(shape, generator=generator) * 300).half()  # noqa: E731
    small = lambda: torch.randn(shape, generator=generator).half()  # noqa: E731
    inputs = [big(), big(), small(), big(), big(), small()]
    scores = inputs[0].float() @ inputs[1].float().transpose(-1, -2)
    assert scores.abs().max() > 65504, "the test must actually overflow fp16 scores"
    grad_out = torch.randn(shape, generator=generator).half()

    on_device = device_masks(masks)
    results = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, on_device), inputs, grad_out)
    reference = forward_backward(lambda *x: reference_attention(*x, pattern, masks),
                                 [t.double() for t in inputs], grad_out.double())
    for name, result in zip(NAMES, results):
        assert torch.isfinite(result).all(), f"{name} is not finite"
    torch.testing.assert_close(results[0].double(), reference[0], atol=1e-2, rtol=1e-2)
    # The backward recomputes P = exp2(s - lse) with s ~ 1e5: one fp32 ulp of s is ~0.016 in
    # log2 units, so a recomputed probability near 1 is off by ~1%, and dv sums a few of them.
    # That is inherent to recomputation (FlashAttention has it too), hence 5% on dv, dv_g; the
    # other gradients are ~0 here (the softmax is one-hot) and must stay finite and tiny.
    for name, result, ref in zip(NAMES[1:], results[1:], reference[1:]):
        loose = name in ("dv", "dv_g")
        torch.testing.assert_close(result.double(), ref, atol=2e-2 if loose else 1e-3,
                                   rtol=5e-2 if loose else 1e-2, msg=name)


def test_global_inputs_without_global_tokens_get_zero_gradients():
    case = Case("no_globals", 2, 2, 33, window=2, dilation=(1, 2), valid_lengths=[33, 20],
                global_positions=[[], [25]])  # 25 is padding: no token is global
    pattern = AttentionPattern(case.window, case.dilation)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, torch.float32)
    results = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, masks), inputs, grad_out)
    without = forward_backward(
        lambda *x: triton_longformer_attention(*x, None, None, None, pattern,
                                               AttentionMasks(padding=masks.padding)),
        inputs[:3], grad_out)
    for name, a, b in zip(NAMES[:4], results[:4], without[:4]):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    for name, grad in zip(NAMES[4:], results[4:]):
        assert (grad == 0).all(), f"{name} must be zero when no token is global"


def test_clear_errors(accelerator):
    pattern = AttentionPattern(window=2)
    q = torch.randn(1, 2, 8, HEAD_DIM, device=accelerator.device)
    with pytest.raises(ValueError, match="q must be"):
        triton_longformer_attention(q[0], q[0], q[0], None, None, None, pattern)
    with pytest.raises(ValueError, match="k must match q"):
        triton_longformer_attention(q, q.half(), q, None, None, None, pattern)
    with pytest.raises(ValueError, match="v must match q"):
        triton_longformer_attention(q, q, q[:, :, :4], None, None, None, pattern)
    is_global = torch.zeros(1, 8, dtype=torch.bool, device=accelerator.device)
    is_global[0, 0] = True
    with pytest.raises(ValueError, match="q_g is None"):
        triton_longformer_attention(q, q, q, None, None, None, pattern,
                                    AttentionMasks(is_global=is_global))
    with pytest.raises(ValueError, match="shape"):
        triton_longformer_attention(q, q, q, None, None, None, pattern,
                                    AttentionMasks(padding=torch.zeros(1, 7, dtype=torch.bool, device=accelerator.device)))
    with pytest.raises(ValueError, match="must be one of"):
        triton_longformer_attention(q.double(), q.double(), q.double(), None, None, None, pattern)
    with pytest.raises(ValueError, match="dilation gives 3 values"):
        triton_longformer_attention(q, q, q, None, None, None,
                                    AttentionPattern(window=2, dilation=(1, 2, 3)))
    wide = torch.randn(1, 1, 4, 300, device=accelerator.device)
    with pytest.raises(ValueError, match="head dim"):
        triton_longformer_attention(wide, wide, wide, None, None, None, pattern)


class _Anything:
    def __contains__(self, item):
        return True


@pytest.mark.parametrize("blocks", [(32, 16), (16, 32)], ids=["m32_n16", "m16_n32"])
def test_unequal_query_and_key_blocks(blocks, monkeypatch):
    """Loop bounds use BLOCK_M for queries and BLOCK_N for keys; a swap would show here.
    (32, 16): causal; (16, 32): global tokens (a causal pattern has none)."""
    real = kernels.block_config
    monkeypatch.setattr(kernels, "block_config", lambda *args: kernels.BlockConfig(
        blocks[0], blocks[1], real(*args).block_d, 1, 1))
    monkeypatch.setattr(kernels, "_known_configs", lambda interpret: _Anything())
    causal = blocks[0] > blocks[1]
    # window 40 > 32 + 16: interior tiles (no mask) beside edge tiles, in both orientations
    case = Case("unequal", 2, 3, 130, window=40, dilation=(1, 2, 3), causal=causal,
                valid_lengths=[130, 97],
                global_positions=None if causal else [list(range(0, 130, 9)), [9]])
    pattern = AttentionPattern(case.window, case.dilation, case.causal)
    masks = case_masks(case)
    inputs, grad_out = random_inputs(case, torch.float32)
    results = forward_backward(
        lambda *x: triton_longformer_attention(*x, pattern, masks, dropout=DROPOUT), inputs, grad_out)
    reference = forward_backward(lambda *x: reference_attention(*x, pattern, masks, dropout=DROPOUT),
                                 [None if t is None else t.double() for t in inputs], grad_out.double())
    for name, result, ref in zip(NAMES, results, reference):
        if ref is not None:
            torch.testing.assert_close(result.double(), ref, atol=1e-5, rtol=1e-5, msg=name)
