"""The band kernels' tile classification (``triton_device._band_interior``) against brute force.

A band tile whose every (query, key) pair is in the window (and, with dilation, in one residue)
runs without a mask when its rows and keys are all LOCAL. If ``_band_interior`` called a tile
interior that holds one pair outside the band, that pair would be attended: so it must be exactly
"every pair in the band". Checked for every pair of tiles of a t-space, two-sided and causal,
with and without the residue layout, with tiles that straddle the window edges, the residue
boundaries and the end of the t-space; the outputs of the kernels that use it are checked
against the reference in test_triton_attention.py (cases named "interior").
"""
import itertools
import os

import pytest
import torch

assert os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from longformer_kernels.triton_device import _band_interior  # noqa: E402

from tests.conftest import ACCELERATOR  # noqa: E402


@triton.jit
def _classify_kernel(OUT, M, window, CAUSAL: tl.constexpr, DILATED: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """OUT[i, j] = _band_interior of query tile i and key tile j."""
    i = tl.program_id(0)
    j = tl.program_id(1)
    q_first = i * BLOCK_M
    k_first = j * BLOCK_N
    inside = _band_interior(q_first, q_first + BLOCK_M - 1, k_first, k_first + BLOCK_N - 1, M,
                            window, CAUSAL, DILATED)
    tl.store(OUT + i * tl.num_programs(1) + j, inside.to(tl.int32))


def _brute_force(t_len, m, window, causal, block_m, block_n):
    """Every pair of the tiles in the band: -w <= t_q - t_k <= w (causal 0 <= ...), one residue
    (t // M equal)."""
    t = torch.arange(t_len)
    diff = t[:, None] - t[None, :]
    ok = (diff <= window) & (diff >= (0 if causal else -window)) & (t[:, None] // m == t[None, :] // m)
    rows, cols = -(-t_len // block_m), -(-t_len // block_n)
    # indices past the t-space are never LOCAL, so a tile reaching them is no interior tile
    # for the kernels; here they count as outside the band
    padded = torch.zeros(rows * block_m, cols * block_n, dtype=torch.bool)
    padded[:t_len, :t_len] = ok
    return padded.view(rows, block_m, cols, block_n).all(dim=3).all(dim=1)


@pytest.mark.parametrize("causal", [False, True], ids=["two_sided", "causal"])
@pytest.mark.parametrize("dilation", [1, 3])
@pytest.mark.parametrize("blocks", [(16, 16), (16, 8), (8, 16)], ids=lambda b: f"{b[0]}x{b[1]}")
# windows at and beside the distances between tile ends (15 + 16 k, 7 + 8 k): off-by-ones show
@pytest.mark.parametrize("window", [22, 30, 31, 38, 39])
def test_band_interior_is_exactly_every_pair_in_the_band(causal, dilation, blocks, window):
    block_m, block_n = blocks
    length = 150
    m = -(-length // dilation)
    t_len = m * dilation
    rows, cols = -(-t_len // block_m), -(-t_len // block_n)
    out = torch.full((rows, cols), -1, dtype=torch.int32, device=ACCELERATOR.device)
    _classify_kernel[(rows, cols)](out, m, window, CAUSAL=causal, DILATED=dilation > 1,
                                   BLOCK_M=block_m, BLOCK_N=block_n)
    expected = _brute_force(t_len, m, window, causal, block_m, block_n)
    # the kernel does not look at the t-space's end (kinds do); compare tiles inside it
    inside = torch.zeros_like(expected)
    inside[:t_len // block_m, :t_len // block_n] = True
    got = out.cpu().bool()
    assert torch.equal(got & inside, expected & inside)
    assert (~expected & inside).any()
    if window >= 2 * max(blocks) - 1:  # wide enough for interior tiles: some must be found
        assert (expected & inside).any(), "no interior tile: the case tests nothing"
