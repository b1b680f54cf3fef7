"""The CPU buffer pool that spares the PyTorch path's dropout hash words and mask buffers a
page fault per 4 KiB on every call: what it hands out, what it keeps, and that a pooled
buffer's old contents never reach a result."""
import pytest
import torch

from longformer_kernels import AttentionDropout, AttentionMasks, AttentionPattern, sliding_chunks_attention
from longformer_kernels import band_layout, fused_keep, sliding_chunks
from longformer_kernels.buffer_pool import POOL, BufferPool


def test_take_hands_back_a_returned_buffer_of_the_same_shape_and_dtype():
    pool = BufferPool(capacity_bytes=1 << 20)
    first = pool.take((4, 8), torch.int32, torch.device("cpu"))
    pool.give(first)
    assert pool.take((4, 8), torch.float32, "cpu").data_ptr() != first.data_ptr()  # other dtype: fresh
    assert pool.take((8, 4), torch.int32, "cpu").data_ptr() != first.data_ptr()  # other shape: fresh
    again = pool.take((4, 8), torch.int32, "cpu")
    assert again.data_ptr() == first.data_ptr()
    assert pool.held_bytes() == 0  # taken means gone from the pool: never handed out twice
    assert pool.take((4, 8), torch.int32, "cpu").data_ptr() != again.data_ptr()


def test_the_pool_keeps_at_most_its_capacity_newest_first():
    pool = BufferPool(capacity_bytes=3 * 400)
    buffers = [torch.empty(100, dtype=torch.int32) for _ in range(4)]  # 400 bytes each
    for buffer in buffers:
        pool.give(buffer)
    assert pool.held_bytes() == 1200
    kept = {pool.take((100,), torch.int32, "cpu").data_ptr() for _ in range(3)}
    assert kept == {b.data_ptr() for b in buffers[1:]}  # the oldest was dropped
    pool.give(torch.empty(1000, dtype=torch.int32))  # larger than the whole pool: not kept
    assert pool.held_bytes() == 0


def test_buffers_off_the_cpu_pass_through():
    pool = BufferPool()
    pool.give(torch.empty(16, device="meta"))
    assert pool.held_bytes() == 0
    assert pool.take((16,), torch.float32, torch.device("meta")).device.type == "meta"


def _dropout_run(seed=3):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 1025, 8, generator=gen, dtype=torch.float64).requires_grad_() for _ in range(3))
    grad_out = torch.randn(2, 3, 1025, 8, generator=gen, dtype=torch.float64)
    masks = AttentionMasks(padding=torch.arange(1025).expand(2, -1) >= torch.tensor([[1025], [1000]]))
    out = sliding_chunks_attention(q, k, v, None, None, None, AttentionPattern(16), masks,
                                   dropout=AttentionDropout(0.25, seed))
    return out, (q, k, v), grad_out


def _fill_pool_with_garbage() -> None:
    """Every buffer the pool holds gets random bytes (NaNs and infinities among them)."""
    taken = []
    while POOL._free:
        buffer = POOL._free.pop()
        buffer.view(torch.uint8).random_(0, 256, generator=torch.Generator().manual_seed(len(taken)))
        taken.append(buffer)
    for buffer in taken:
        POOL.give(buffer)


@pytest.mark.parametrize("fused", [False, True], ids=["eager-mask", "fused-mask"])
def test_pooled_buffers_full_of_garbage_give_the_same_result_as_fresh_ones(fused, monkeypatch):
    monkeypatch.setattr(fused_keep, "ENABLED", fused)
    POOL.clear()
    out, leaves, grad_out = _dropout_run()
    fresh = [out.detach()] + list(torch.autograd.grad(out, leaves, grad_out))
    held = POOL.held_bytes()
    assert held > 0  # the hash words and the mask buffers came back after the backward
    _fill_pool_with_garbage()  # then run again on those buffers
    out, leaves, grad_out = _dropout_run()
    if not fused:  # the forward took the hash words from the pool (the backward returns them)
        assert POOL.held_bytes() < held
    pooled = [out.detach()] + list(torch.autograd.grad(out, leaves, grad_out))
    for a, b in zip(fresh, pooled):
        assert torch.equal(a, b)
    assert POOL.held_bytes() == held


@pytest.mark.parametrize("fused", [False, True], ids=["eager-mask", "fused-mask"])
@pytest.mark.parametrize("clear_between", [False, True])
def test_a_second_backward_with_retain_graph_draws_the_same_mask(clear_between, fused, monkeypatch):
    monkeypatch.setattr(fused_keep, "ENABLED", fused)
    out, leaves, grad_out = _dropout_run()
    first = torch.autograd.grad(out, leaves, grad_out, retain_graph=True)
    if clear_between:
        POOL.clear()
    else:  # someone else takes the returned words and scribbles on them
        for buffer in POOL._free:
            buffer.fill_(-1)
    second = torch.autograd.grad(out, leaves, grad_out)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_the_band_pass_buffers_come_from_the_pool_and_their_garbage_never_reaches_a_result():
    """Without dropout too: the per-group score, gradient and window buffers (tens of MiB at
    N = 4,096 with threads) and the chunked dO are pooled, so a second call refaults nothing;
    whatever a pooled buffer held before, values and gradients are bitwise those of fresh ones."""
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 300, 8, generator=gen, dtype=torch.float64).requires_grad_() for _ in range(3))
    grad_out = torch.randn(1, 2, 300, 8, generator=gen, dtype=torch.float64)
    is_global = torch.zeros(1, 300, dtype=torch.bool)
    is_global[0, [0, 150]] = True
    masks = AttentionMasks(is_global=is_global)

    def run():
        out = sliding_chunks_attention(q, k, v, q, k, v, AttentionPattern(16), masks)
        return [out.detach()] + list(torch.autograd.grad(out, (q, k, v), grad_out))

    POOL.clear()
    fresh = run()
    held = POOL.held_bytes()
    assert held > 0
    _fill_pool_with_garbage()
    pooled = run()
    for a, b in zip(fresh, pooled):
        assert torch.equal(a, b)
    assert POOL.held_bytes() == held  # taken and given back, none kept elsewhere



class _Interrupted(Exception):
    pass


def _raising_on_call(function, call):
    """``function``, except that its ``call``-th call (counting from 1) raises ``_Interrupted``."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(None)
        if len(calls) == call:
            raise _Interrupted
        return function(*args, **kwargs)
    return wrapped


def _pool_contents():
    return sorted((buffer.data_ptr(), buffer.nbytes) for buffer in POOL._free)


@pytest.mark.parametrize("dropout", ["no-dropout", "eager-mask", "fused-mask"])
@pytest.mark.parametrize("raising", [("exp_and_lse", 2), ("_fold", 3)], ids=["forward", "backward"])
def test_a_pass_that_raises_midway_leaves_the_pool_with_the_buffers_it_had(raising, dropout, monkeypatch):
    """An exception inside the band pass (in the forward's second group of windows, or in the
    backward's second) gives back every pooled buffer taken so far: the pool then holds the very
    buffers it held before, and the next call gives the same values and gradients."""
    monkeypatch.setattr(fused_keep, "ENABLED", dropout == "fused-mask")
    # c = 32, L = 64 at w = 16: 16 windows a group, so the 2 x 2 x 17 windows are 5 groups
    for name in ("GROUP_SCORES", "GROUP_SCORES_THREADED"):
        monkeypatch.setattr(band_layout, name, 16 * 32 * 64)
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 2, 520, 8, generator=gen, dtype=torch.float64).requires_grad_() for _ in range(3))
    grad_out = torch.randn(2, 2, 520, 8, generator=gen, dtype=torch.float64)
    is_global = torch.zeros(2, 520, dtype=torch.bool)
    is_global[:, 0] = True
    drop = None if dropout == "no-dropout" else AttentionDropout(0.25, 7)

    def run():
        out = sliding_chunks_attention(q, k, v, q, k, v, AttentionPattern(16), AttentionMasks(is_global=is_global),
                                       dropout=drop)
        return [out.detach()] + list(torch.autograd.grad(out, (q, k, v), grad_out))

    POOL.clear()
    want = run()
    held = _pool_contents()
    assert held  # a whole forward and backward gave its buffers back
    name, call = raising
    function = getattr(sliding_chunks, name)
    monkeypatch.setattr(sliding_chunks, name, _raising_on_call(function, call))
    with pytest.raises(_Interrupted):
        run()
    assert _pool_contents() == held
    monkeypatch.setattr(sliding_chunks, name, function)
    for a, b in zip(want, run()):
        assert torch.equal(a, b)
