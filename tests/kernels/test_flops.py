"""``flops``: the one count of useful attention FLOPs (CPU and GPU benchmarks), checked against
brute force on small sizes."""
import itertools

import pytest

from longformer_tools import flops


def brute_force_pairs(length, window, global_tokens):
    """Pairs (i, j) attended with the first G tokens global: in the band, a global row or a global column."""
    return sum(1 for i, j in itertools.product(range(length), repeat=2)
               if abs(i - j) <= window or i < global_tokens or j < global_tokens)


@pytest.mark.parametrize("length", [1, 2, 5, 9, 16])
@pytest.mark.parametrize("window", [0, 1, 3, 8, 20])
def test_band_pairs_clip_at_the_sequence_ends(length, window):
    assert flops.band_pairs(length, window) == brute_force_pairs(length, window, 0)
    assert sum(flops.band_row_pairs(i, length, window) for i in range(length)) == flops.band_pairs(length, window)


@pytest.mark.parametrize("length,window,global_tokens", [
    (9, 2, 1), (9, 2, 3), (16, 3, 5), (16, 20, 4), (12, 0, 2), (7, 1, 7), (7, 1, 9), (30, 4, 6)])
def test_attended_pairs_count_each_global_pair_once(length, window, global_tokens):
    assert flops.attended_pairs(length, window, global_tokens) == brute_force_pairs(length, window, global_tokens)


def test_layer_flops_by_hand():
    # B=2, N=10, H=2, D=3 (C=6), w=1, G=2, with the output projection
    counted = flops.layer_flops(2, 10, 2, 3, 1, 2, output_projection=True)
    rows = 3 * 10 + 2 * 10 + 2 + 10  # q k v, k_g v_g, q_g on the G rows, out
    assert counted.projections == 2 * 2 * rows * 6 * 6
    assert counted.pairs == 2 * brute_force_pairs(10, 1, 2) * 4 * 6
    assert counted.forward_backward == 3 * counted.forward == 3 * (counted.projections + counted.pairs)
    plain = flops.layer_flops(1, 10, 2, 3, 1, 0)
    assert plain.projections == 2 * 30 * 36 and plain.pairs == 4 * 6 * (10 * 3 - 2)


def test_attention_flops_is_the_pairs_count_for_every_benchmark():
    """The core's count (GPU benchmark) is the layer's pair term (CPU benchmark), forward+backward
    3x the forward, global rows and columns included."""
    for glob in (0, 8):
        core = flops.attention_flops(2, 12, 4096, 64, 256, glob)
        assert core == flops.layer_flops(2, 4096, 12, 64, 256, glob).pairs
        assert flops.attention_flops(2, 12, 4096, 64, 256, glob, backward=True) == 3 * core
    assert flops.attention_flops(1, 1, 16, 4, 2) == 4 * 4 * brute_force_pairs(16, 2, 0)
    assert flops.attention_flops(1, 1, 16, 4, 2, 3) == 4 * 4 * brute_force_pairs(16, 2, 3)
