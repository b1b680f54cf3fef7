"""The band kernels' interior tiles (``triton_device._interior_range``) against brute force.

Each band walk runs the tiles of ``_interior_range`` with no band mask (only the kinds of their
own entries). If it named a tile that holds one pair outside the band, that pair would be
attended; if it left out a tile inside, that tile would only run slower. So the range must be
exactly the tiles whose every pair is in the band. Checked for every block of a t-space, in both
orientations (query blocks walking keys, key blocks walking queries), two-sided and causal, with
and without the residue layout, with tiles that straddle the window edges, the residue
boundaries and the end of the t-space; the outputs of the kernels that use it are checked
against the reference in test_triton_attention.py (cases named "interior").
"""
import os

import pytest
import torch

assert os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from longformer_kernels.triton_device import _band_range, _interior_range  # noqa: E402

from tests.conftest import ACCELERATOR  # noqa: E402


@triton.jit
def _ranges_kernel(OUT, M, T, window, CAUSAL: tl.constexpr, FIND_KEYS: tl.constexpr,
                   OWN: tl.constexpr, WALK: tl.constexpr):
    """OUT[i] = (lo, hi, ilo, ihi) of own block i (OWN indices) walking tiles of WALK."""
    first = tl.program_id(0) * OWN
    last = first + OWN - 1
    lo, hi = _band_range(first, tl.minimum(first + OWN, T) - 1, M, window, CAUSAL, FIND_KEYS, WALK)
    # the kernels pass "every row LOCAL"; rows past the t-space are PAD, never LOCAL
    ilo, ihi = _interior_range(first, last, lo, hi, M, window, last < T, CAUSAL, FIND_KEYS, WALK)
    base = OUT + tl.program_id(0) * 4
    tl.store(base, lo)
    tl.store(base + 1, hi)
    tl.store(base + 2, ilo)
    tl.store(base + 3, ihi)


def _in_band(own, walked, m, window, causal, find_keys):
    """(len(own), len(walked)) bool: the pair is in the band (one residue, within the window;
    causal: key not after query) with own indices as queries when find_keys, else as keys."""
    q, k = (own[:, None], walked[None, :]) if find_keys else (walked[None, :], own[:, None])
    diff = q - k
    return (diff <= window) & (diff >= (0 if causal else -window)) & (q // m == k // m)


@pytest.mark.parametrize("causal", [False, True], ids=["two_sided", "causal"])
@pytest.mark.parametrize("find_keys", [True, False], ids=["query_blocks", "key_blocks"])
@pytest.mark.parametrize("dilation", [1, 3])
@pytest.mark.parametrize("blocks", [(16, 16), (16, 8), (8, 16)], ids=lambda b: f"{b[0]}x{b[1]}")
# windows at and beside the distances between tile ends (15 + 16 k, 7 + 8 k): off-by-ones show
@pytest.mark.parametrize("window", [22, 30, 31, 38, 39])
def test_interior_range_is_exactly_the_tiles_inside_the_band(causal, find_keys, dilation, blocks, window):
    own_block, walk_block = blocks
    length = 150
    m = -(-length // dilation)
    t_len = m * dilation
    blocks_count = -(-t_len // own_block)
    out = torch.full((blocks_count, 4), -1, dtype=torch.int32, device=ACCELERATOR.device)
    _ranges_kernel[(blocks_count,)](out, m, t_len, window, CAUSAL=causal, FIND_KEYS=find_keys,
                                    OWN=own_block, WALK=walk_block)
    found_interior = 0
    for i, (lo, hi, ilo, ihi) in enumerate(out.cpu().tolist()):
        assert lo % walk_block == 0 and lo <= ilo <= ihi <= max(hi, lo), (i, lo, hi, ilo, ihi)
        assert (ilo - lo) % walk_block == 0 and (ihi - lo) % walk_block == 0
        own = torch.arange(i * own_block, (i + 1) * own_block)
        expected = []
        for start in range(lo, hi, walk_block):
            walked = torch.arange(start, start + walk_block)
            inside = (own < t_len).all() and (walked < t_len).all() and bool(
                _in_band(own, walked, m, window, causal, find_keys).all())
            if inside:
                expected.append(start)
        assert list(range(ilo, ihi, walk_block)) == expected, (i, lo, hi, ilo, ihi, expected)
        found_interior += len(expected)
    if window >= 2 * max(blocks) - 1:  # wide enough for interior tiles: some must be found
        assert found_interior, "no interior tile: the case tests nothing"
