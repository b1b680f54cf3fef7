"""Tiles chosen by hand (LONGFORMER_TRITON_TILES) and by the GPU sweep (gpu_tune): parsed with
clear refusals, accepted by the launchers, and the kernels stay exact with them (Triton's
interpreter runs the GPU tiles: LONGFORMER_TRITON_GPU_TILES=1)."""
import pytest
import torch

import longformer_kernels.triton_attention as kernels  # noqa: E402  (conftest chose the interpreter)
import longformer_kernels.triton_tiles as tiles  # noqa: E402
from kernel_helpers import Case, case_masks, device_masks, forward_backward, random_inputs
from longformer_tools.gpu import gpu_tune
from longformer_kernels.pattern import AttentionPattern
from longformer_kernels.reference import reference_attention


def test_tiles_variable_is_parsed_per_kernel_or_for_all(monkeypatch):
    monkeypatch.setenv(kernels.TILES_ENV, "128x64x8x2")
    assert kernels._tile_overrides() == {"*": (128, 64, 8, 2)}
    monkeypatch.setenv(kernels.TILES_ENV, " band_fwd=64x32x4x3, band_bwd_dkdv=32x64x4x2 ")
    assert kernels._tile_overrides() == {"band_fwd": (64, 32, 4, 3), "band_bwd_dkdv": (32, 64, 4, 2)}
    monkeypatch.setenv(kernels.TILES_ENV, "")
    assert kernels._tile_overrides() == {}


@pytest.mark.parametrize("value, problem", [
    ("64x64", "is not [KERNEL=]BMxBNxWARPSxSTAGES"),
    ("48x64x4x2", "power-of-two"),
    ("band_fwd=64x64x0x2", "is not [KERNEL=]BMxBNxWARPSxSTAGES"),
    ("band_forward=64x64x4x2", "unknown kernel 'band_forward'"),
])
def test_tiles_variable_refuses_bad_values(monkeypatch, value, problem):
    monkeypatch.setenv(kernels.TILES_ENV, value)
    with pytest.raises(ValueError, match="LONGFORMER_TRITON_TILES") as error:
        kernels._tile_overrides()
    assert problem in str(error.value)


def test_swept_tiles_are_launched_and_exact(monkeypatch):
    """gpu_tune.use_tiles (as the variable's "all kernels" form) with unequal 16 x 32 tiles:
    every launch takes them, and output and gradients match the float64 reference."""
    monkeypatch.setenv(kernels.GPU_TILES_ENV, "1")
    monkeypatch.setattr(tiles, "_TILE_OVERRIDES", {})
    seen = []
    real_launch = kernels._launch

    def launch(kernel, grid, args, lay, **flags):
        seen.append(lay.configs[kernel.fn.__name__])
        return real_launch(kernel, grid, args, lay, **flags)

    monkeypatch.setattr(kernels, "_launch", launch)
    try:
        gpu_tune.use_tiles((16, 32, 4, 2))
        case = Case("tiles", 1, 2, 70, window=9, dilation=(1, 2), valid_lengths=[64], global_positions=[[0, 33]],
                    head_dim=16)
        pattern, masks = AttentionPattern(case.window, case.dilation), case_masks(case)
        inputs, grad_out = random_inputs(case, torch.float32)
        got = forward_backward(lambda *x: kernels.triton_longformer_attention(*x, pattern, device_masks(masks)),
                               inputs, grad_out)
        want = forward_backward(lambda *x: reference_attention(*x, pattern, masks),
                                [t.double() for t in inputs], grad_out.double())
    finally:
        tiles._TILE_OVERRIDES = {}
        tiles.launch_configurations.cache_clear()
        tiles._known_configs.cache_clear()
    assert seen and {(c.block_m, c.block_n, c.num_warps, c.num_stages) for c in seen} == {(16, 32, 4, 2)}
    for result, ref in zip(got, want):
        if ref is not None:
            assert (result.double() - ref).abs().max().item() < 1e-4


def test_kernel_names_of_the_profile_map_to_the_variable():
    assert gpu_tune.short_name("_band_bwd_dq_kernel") == "band_bwd_dq"
    assert gpu_tune.short_name("_band_bwd_dkdv_kernel") == "band_bwd_dkdv"
    assert gpu_tune.short_name("void at::native::vectorized_elementwise_kernel<4>") is None


def test_gpu_tune_refuses_without_cuda(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the sweep would run")
    with pytest.raises(SystemExit) as stop:
        gpu_tune.main([str(tmp_path)])
    assert stop.value.code == 2 and "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("programs", [1, 10_000], ids=["one_chunk", "a_chunk_per_tile"])
def test_global_rows_split_into_chunks_are_exact(monkeypatch, programs):
    """The global rows' kernels split their N keys (queries) into chunks, reduced in order by a
    second kernel: with no split, and with one chunk per tile (the last one partial, padding in
    another chunk than the globals), output and all six gradients match the float64 reference,
    with dropout."""
    from longformer_kernels import AttentionDropout

    monkeypatch.setattr(kernels, "INTERPRETER_PROGRAMS", programs)
    seen = []
    real = kernels._global_splits
    monkeypatch.setattr(kernels, "_global_splits", lambda *a: seen.append(real(*a)) or seen[-1])
    case = Case("split", 2, 2, 101, window=3, dilation=(1, 2), valid_lengths=[101, 70],
                global_positions=[[0, 50, 100], [7]], head_dim=16)
    pattern, masks = AttentionPattern(case.window, case.dilation), case_masks(case)
    dropout = AttentionDropout(0.2, 11)
    inputs, grad_out = random_inputs(case, torch.float32)
    got = forward_backward(lambda *x: kernels.triton_longformer_attention(*x, pattern, device_masks(masks),
                                                                          dropout=dropout), inputs, grad_out)
    want = forward_backward(lambda *x: reference_attention(*x, pattern, masks, dropout=dropout),
                            [t.double() for t in inputs], grad_out.double())
    assert len(seen) == 3  # forward, dq_g, dk/dv of global keys
    if programs == 1:
        assert all(splits == 1 for splits, _ in seen), seen
    else:  # 32-position tiles (the interpreter's): 4 chunks of 101 positions, the last of 5
        assert all(splits == 4 and chunk == 32 for splits, chunk in seen), seen
    for result, ref in zip(got, want):
        assert (result.double() - ref).abs().max().item() < 1e-5
