"""The configuration GPUs run in production: 16-bit inputs, head dim 64 (longformer-base and
-large), the tiles ``block_config`` picks for a GPU (per kernel), with dropout, dilation, padding and
global tokens, for every Triton kernel (band forward, dq, dk/dv, global rows forward and
backward, cross, and each band one with the band bias), against the float64 reference: the
output and every gradient, by the rules of test_triton_attention.py / test_triton_band_bias.py
(at most 2x, with dropout 3x, plain PyTorch's error at the same dtype).

Where: the ``accelerator`` fixture (tests/conftest.py): on CUDA the compiled kernels in fp16 and
bf16; on a CPU Triton's interpreter, which runs the same kernels with the same tiles
(LONGFORMER_TRITON_GPU_TILES=1) in fp16 only: its bf16 arithmetic is wrong (raw bits), so there
bf16 at D = 64 is checked on the PyTorch path instead (``test_bf16_torch_path``). The
interpreter is slow: N = 192 is three 64-key blocks, the band (w = 40, dilation 2) reaching two
blocks beyond a query's own.
"""
import dataclasses

import pytest
import torch

from kernel_helpers import DEVICE, Case, case_masks, device_masks, forward_backward, random_inputs
from longformer_kernels import sliding_chunks_attention
from longformer_kernels.pattern import AttentionPattern
from longformer_kernels.reference import reference_attention

import longformer_kernels.triton_attention as kernels  # noqa: E402  (conftest chose the interpreter)
from test_triton_attention import DROPOUT, _check_against_reference, _dense_masks, _plain_torch
from test_triton_band_bias import _check as _check_with_band_bias

HEAD_DIM = 64
CASE = Case("production_d64", 2, 2, 192, window=40, dilation=(1, 2), valid_lengths=[192, 150],
            global_positions=[[0, 65, 130], [3, 149]], head_dim=HEAD_DIM)
CAUSAL = dataclasses.replace(CASE, name="production_d64_causal", causal=True, global_positions=None)


def _sixteen_bit(accelerator):
    return [d for d in accelerator.triton_dtypes if d != torch.float32]


@pytest.fixture
def launched(monkeypatch):
    """The launch configurations every kernel call used, with the GPU tiles forced."""
    monkeypatch.setenv(kernels.GPU_TILES_ENV, "1")
    seen = []
    real_launch = kernels._launch

    def launch(kernel, grid, args, lay, **flags):
        name = kernel.fn.__name__ if hasattr(kernel, "fn") else kernel.__name__
        seen.append((name, lay.configs[name]))
        return real_launch(kernel, grid, args, lay, **flags)

    monkeypatch.setattr(kernels, "_launch", launch)
    return seen


def _assert_production_tiles(seen, dtype):
    """Every launch used its kernel's GPU tiles: the per-kernel table of triton_attention (the
    H200 sweep's winners: unequal 64 x 32 and 32 x 64 band tiles, 64 x 128 for the global rows)."""
    element_size = torch.empty((), dtype=dtype).element_size()
    assert seen
    for name, config in seen:
        gpu = kernels.block_config(HEAD_DIM, element_size, False, name)
        tiles = kernels.TILES_16BIT_D64.get(name, (64, 64))
        assert (config.block_m, config.block_n, config.block_d) == (*tiles, 64) and config == gpu, (name, config)
    assert {(c.block_m, c.block_n) for _, c in seen} >= {(64, 32), (32, 64)}, seen
    return {name for name, _ in seen}


def test_every_kernel_in_16_bits_with_gpu_tiles(accelerator, launched):
    for dtype in _sixteen_bit(accelerator):
        launched.clear()
        _check_against_reference(CASE, dtype, DROPOUT)  # band, global rows, cross: fwd + bwd
        _check_against_reference(CAUSAL, dtype, DROPOUT)
        without_bias = _assert_production_tiles(launched, dtype)
        launched.clear()
        _check_with_band_bias(dataclasses.replace(CASE, heads=2), dtype, DROPOUT)  # HAS_BIAS
        with_bias = _assert_production_tiles(launched, dtype)
        assert without_bias | with_bias == set(kernels.KERNEL_FLAGS), without_bias | with_bias


def test_bf16_torch_path(accelerator):
    """bf16 at D = 64 on the PyTorch path (the interpreter cannot run bf16 Triton): output and
    every gradient within 2x (3x for gradients, with dropout) plain PyTorch's bf16 error."""
    dtype = torch.bfloat16
    assert dtype in accelerator.torch_dtypes
    pattern = AttentionPattern(CASE.window, CASE.dilation, CASE.causal)
    masks = case_masks(CASE)
    inputs, grad_out = random_inputs(CASE, dtype)
    assert DEVICE == str(accelerator.device.type)  # forward_backward runs it there
    got = forward_backward(lambda *x: sliding_chunks_attention(*x, pattern, device_masks(masks), dropout=DROPOUT),
                           inputs, grad_out)
    want = forward_backward(lambda *x: reference_attention(*x, pattern, masks, dropout=DROPOUT),
                            [None if t is None else t.double() for t in inputs], grad_out.double())
    plain = forward_backward(lambda *x: _plain_torch(*x, CASE, _dense_masks(CASE, masks), DROPOUT), inputs, grad_out)
    for index, (result, ref, base) in enumerate(zip(got, want, plain)):
        if result is None:
            continue
        assert result.dtype == dtype and torch.isfinite(result).all()
        err = (result.double() - ref).abs().max().item()
        base_err = (base.double() - ref).abs().max().item()
        factor = 2 if index == 0 else 3
        assert err <= factor * base_err + 2e-3, (index, err, base_err)
