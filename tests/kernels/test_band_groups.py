"""The PyTorch path's windows are processed a group at a time, the group sized by the torch thread
count (``band_layout.group_budget``: cache-sized with one thread, larger with more, so that a
busy machine's descheduled thread stalls fewer parallel regions). The size is a speed choice
only: outputs and gradients are the float64 reference's whether one window or all of them
make a group, with and without dropout."""
import pytest
import torch

import longformer_kernels.band_layout as band_layout
from longformer_kernels import AttentionDropout, AttentionPattern, reference_attention, sliding_chunks_attention
from longformer_kernels.band_layout import BandLayout, group_budget

from tests.kernels.test_attention_equivalence import make_inputs, outputs_and_grads


def _threads(count):
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    return previous


def test_budget_follows_the_thread_count_and_the_device():
    previous = _threads(1)
    try:
        assert group_budget(torch.device("cpu")) == band_layout.GROUP_SCORES
        one = BandLayout(1, 12, 4096, 64, 512, False, torch.device("cpu")).group
        torch.set_num_threads(2)
        assert group_budget(torch.device("cpu")) == band_layout.GROUP_SCORES_THREADED
        two = BandLayout(1, 12, 4096, 64, 512, False, torch.device("cpu")).group
    finally:
        torch.set_num_threads(previous)
    assert group_budget(torch.device("meta")) == band_layout.GROUP_SCORES_GPU
    # the LED's w = 512 at N = 4,096: c = 128, L = 1,152 keys; 384 windows of 12 heads
    assert (one, two) == (band_layout.GROUP_SCORES // (128 * 1152), band_layout.GROUP_SCORES_THREADED // (128 * 1152))
    assert -(-384 // two) * 8 <= -(-384 // one)  # at least 8x fewer groups (parallel regions) with threads


@pytest.mark.parametrize("p_drop", [0.0, 0.1])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("budget", [1, 10 ** 9])  # one window per group; every window in one group
def test_any_group_size_matches_the_reference(monkeypatch, budget, threads, p_drop):
    monkeypatch.setattr(band_layout, "GROUP_SCORES", budget)
    monkeypatch.setattr(band_layout, "GROUP_SCORES_THREADED", budget)
    tensors, masks = make_inputs(2, 3, 97, 8, 3, 5)
    pattern = AttentionPattern(window=4, dilation=(1, 2, 1))
    dropout = AttentionDropout(p_drop, seed=11) if p_drop else None
    previous = _threads(threads)
    try:
        out, grads = outputs_and_grads(sliding_chunks_attention, tensors, pattern, masks, dropout)
    finally:
        torch.set_num_threads(previous)
    ref_out, ref_grads = outputs_and_grads(reference_attention, tensors, pattern, masks, dropout)
    torch.testing.assert_close(out, ref_out, atol=1e-10, rtol=1e-10)
    for grad, ref in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref, atol=1e-10, rtol=1e-10)
