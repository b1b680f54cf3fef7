"""The attention-dropout keep mask (``dropout.py``): its rate, its quantisation of p, the
independence of its entries, and the PyTorch path's one-hash-per-four-keys evaluation against
the per-entry definition, and the fused (numba) evaluation against the eager one.

Independence is checked with a chi-square test on 2 x 2 tables of keep bits of entry pairs at a
fixed offset (neighbouring keys in one hash word and across words, neighbouring rows, heads,
batch rows, seeds) at p = 0.5, where a dependence shows most. With a million pairs a correlation
of 0.005 gives chi2 = 25 (the failure line, a p-value of about 6e-7): the test can fail, and
``test_the_independence_test_catches_a_correlated_mask`` shows that it does.
"""
import importlib.util
import math
import os
import subprocess
import sys

import pytest
import torch

from longformer_kernels import AttentionMasks, AttentionPattern, fused_keep, sliding_chunks_attention
from longformer_kernels.dropout import (AttentionDropout, consecutive_multipliers, consecutive_words_, draws,
                                        first_mix_step, keep_from_rows, keep_from_words_, keep_matrix, row_hash)

CHI2_LIMIT = 25.0  # 1 degree of freedom: P(chi2 > 25) ~ 6e-7 for independent bits


def _chi2(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson's chi-square of the 2 x 2 table of two equally long bool vectors (1 dof)."""
    a, b = a.flatten().double(), b.flatten().double()
    n = a.numel()
    table = torch.tensor([[((1 - a) * (1 - b)).sum(), ((1 - a) * b).sum()],
                          [(a * (1 - b)).sum(), (a * b).sum()]])
    expected = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / n
    return float(((table - expected) ** 2 / expected).sum())


def _keep(seed: int, batch: int, heads: int, rows: int, keys: int, p: float = 0.5) -> torch.Tensor:
    """(B, H, rows, keys) keep bits of the first rows x keys entries."""
    dropout = AttentionDropout(p, seed)
    ar = torch.arange
    hashes = row_hash(seed, ar(batch)[:, None, None], ar(heads)[None, :, None], ar(rows)[None, None, :])
    return keep_from_rows(hashes[..., None], ar(keys), dropout)


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5, 0.9])
def test_rate_is_p_rounded_to_1_256(p):
    """The empirical drop rate of 2M entries is threshold / 256 within 5 standard errors, and
    kept entries are scaled so the expectation is exact for that rate."""
    dropout = AttentionDropout(p, seed=7)
    assert dropout.rate == round(p * 256) / 256
    assert dropout.keep_scale == pytest.approx(1 / (1 - dropout.rate))
    keep = keep_matrix(dropout, 2, 4, 512)
    n = keep.numel()
    sigma = math.sqrt(dropout.rate * (1 - dropout.rate) / n)
    assert abs((1 - keep.double().mean().item()) - dropout.rate) < 5 * sigma
    assert dropout.rate * 0 + (1 - dropout.rate) * dropout.keep_scale == pytest.approx(1.0)


def test_p_the_mask_cannot_resolve_is_refused():
    assert AttentionDropout(0.1, 0).rate == 26 / 256
    assert AttentionDropout(0.0, 0).threshold == 0
    for p in (0.001, 0.999):
        with pytest.raises(ValueError, match="1/256"):
            AttentionDropout(p, 0)


@pytest.mark.parametrize("name, pair", [
    ("next key, same word", lambda k: (k[..., 0:-1:4], k[..., 1::4])),
    ("key 3 and 4: across words", lambda k: (k[..., 3:-1:4], k[..., 4::4])),
    ("same byte of neighbouring words", lambda k: (k[..., :-4], k[..., 4:])),
    ("next row", lambda k: (k[:, :, :-1], k[:, :, 1:])),
    ("next head", lambda k: (k[:, :-1], k[:, 1:])),
    ("next batch row", lambda k: (k[:-1], k[1:])),
])
def test_neighbouring_entries_are_independent(name, pair):
    keep = _keep(seed=3, batch=2, heads=4, rows=256, keys=1024)  # 2M entries
    a, b = pair(keep)
    assert a.numel() >= 500_000
    assert _chi2(a, b) < CHI2_LIMIT, name


def test_neighbouring_seeds_are_independent():
    a, b = _keep(seed=100, batch=1, heads=2, rows=256, keys=1024), _keep(seed=101, batch=1, heads=2, rows=256, keys=1024)
    assert _chi2(a, b) < CHI2_LIMIT


def test_the_independence_test_catches_a_correlated_mask():
    """A mask whose next key copies its neighbour one time in 50 (correlation 0.02) fails."""
    keep = _keep(seed=3, batch=2, heads=4, rows=256, keys=1024)
    copied = keep.clone()
    every = torch.zeros(keep.shape[-1], dtype=torch.bool)
    every[1::50] = True
    copied[..., 1:][..., every[1:]] = keep[..., :-1][..., every[1:]]
    assert _chi2(copied[..., :-1], copied[..., 1:]) > CHI2_LIMIT


def test_draws_are_the_bytes_of_one_hash_per_four_keys():
    """draw(j) is byte j % 4 of the word of group j // 4: the four keys of a group share a hash,
    and its four bytes are four different draws."""
    rows = row_hash(5, torch.tensor(0), torch.tensor(1), torch.arange(3))[:, None]
    j = torch.arange(16)
    got = draws(rows, j)
    word = draws(rows, (j // 4) * 4) | draws(rows, (j // 4) * 4 + 1) << 8 | draws(rows, (j // 4) * 4 + 2) << 16
    word = word | draws(rows, (j // 4) * 4 + 3) << 24
    assert torch.equal((word >> (8 * (j % 4))) & 0xFF, got)
    assert (got >= 0).all() and (got < 256).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("first_group", [-3, 0, 5, 2 ** 20])
def test_consecutive_multipliers_equal_the_per_entry_mask(first_group, dtype):
    """The PyTorch path's byte-view evaluation (one hash per four keys) gives exactly the
    per-entry definition's multipliers, for windows starting before 0 (their keys are masked
    by the band, any value will do, but the hash must not fail) and far into the sequence."""
    dropout = AttentionDropout(0.3, seed=99)
    rows = row_hash(99, torch.tensor(1), torch.tensor(2), torch.arange(40))[None, :, None]  # (1, 40, 1)
    got = consecutive_multipliers(rows, torch.tensor([[[first_group]]], dtype=torch.int32), 8, dropout, dtype)
    keys = torch.arange(32) + 4 * first_group
    expected = keep_from_rows(rows, keys, dropout).to(dtype) * dropout.keep_scale
    assert got.shape == (1, 40, 32) and got.dtype == dtype
    assert torch.equal(got, expected.to(dtype))


def _eager_keep_times(src, row_steps, group_steps, dropout):
    """src times the keep mask by the eager passes (consecutive_words_, keep_from_words_)."""
    words = torch.empty(src.shape[:-1] + (src.shape[-1] // 4,), dtype=torch.int32)
    consecutive_words_(row_steps, group_steps, words, torch.empty_like(words))
    return src * keep_from_words_(words, torch.empty_like(src), dropout)


def _require_fused():
    """Fail (not skip, not pass) where the fused loops cannot run: every install of the tests has
    the 'cpu' extra, so a missing numba is a broken environment, and without it the fused and
    eager runs below would both be the eager passes."""
    if importlib.util.find_spec("numba") is None:
        pytest.fail("numba is missing: install the 'cpu' extra (pip install -e .[dev] has it)")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_loops_equal_the_eager_passes_bit_for_bit(dtype):
    """The numba loops (hash, compare and multiply in one pass; and the softmax backward with
    it) give exactly the eager passes' results, on row and group operands covering the whole
    int32 range, in place and not; a NaN or infinity in a dropped entry stays what x * 0 makes it."""
    _require_fused()
    if not fused_keep.supports(torch.empty(0, dtype=dtype)):
        pytest.fail("the fused loops are switched off (LONGFORMER_FUSED_KEEP=0)")
    gen = torch.Generator().manual_seed(5)
    windows, chunk, width = 7, 12, 40
    row_steps = first_mix_step(torch.randint(-2 ** 31, 2 ** 31 - 1, (windows, chunk, 1), generator=gen,
                                             dtype=torch.int32))
    group_steps = first_mix_step(torch.randint(-2 ** 31, 2 ** 31 - 1, (windows, 1, width // 4), generator=gen,
                                               dtype=torch.int32))
    rows, groups = fused_keep.hash_operands(row_steps, group_steps)
    src = torch.rand(windows, chunk, width, generator=gen, dtype=dtype)
    src[0, 0, :8] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.0, 0.0, -1.0])
    grad = torch.randn(windows, chunk, width, generator=gen, dtype=dtype)
    delta = torch.randn(windows, chunk, 1, generator=gen, dtype=dtype)

    def same(a, b):  # equal, NaNs in the same places, and zeros of the same sign
        return torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) and torch.equal(a.signbit(), b.signbit())

    for p in (0.1, 0.5, 0.9):
        dropout = AttentionDropout(p, seed=0)
        expected = _eager_keep_times(src, row_steps, group_steps, dropout)
        got = fused_keep.keep_times(src, rows, groups, dropout.threshold)
        assert same(got, expected) and torch.equal(got.isnan(), expected.isnan())
        in_place = src.clone()
        assert fused_keep.keep_times(in_place, rows, groups, dropout.threshold, out=in_place) is in_place
        assert same(in_place, expected)
        assert abs((got[1:] == 0).double().mean().item() - dropout.rate) < 0.03
        # the softmax backward: kept = P * keep, dS = kept * dP - P * delta (finite P here)
        probs = src[1:]
        kept, ds = torch.empty_like(probs), grad[1:].clone()
        fused_keep.softmax_grad_(probs, ds, kept, rows[1:], groups[1:], dropout.threshold, delta[1:])
        assert torch.equal(kept, expected[1:])
        assert torch.equal(ds, (grad[1:] * expected[1:]).addcmul_(probs, delta[1:], value=-1.0))


_FIRST_LAUNCH = """
import torch
torch.set_num_threads(1)
from longformer_kernels import fused_keep
usable = fused_keep.supports(torch.rand(1))  # builds the loops
operands = fused_keep.hash_operands(torch.zeros(3, 4, 1, dtype=torch.int32), torch.zeros(3, 1, 2, dtype=torch.int32))
fused_keep.keep_times(torch.rand(3, 4, 8), *operands, 1 << 30)
print(usable, torch.get_num_threads())
"""


def test_the_fused_loops_leave_torchs_thread_count_as_it_was():
    """numba's OpenMP layer shares torch's libgomp and sets its count to NUMBA_NUM_THREADS when
    it starts its pool, at a process's first launch: torch's own count (a thread policy's, a
    benchmark's --threads) must be what it was after the call. In a fresh process, where that
    first launch happens."""
    _require_fused()
    env = dict(os.environ, NUMBA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "1"]


@pytest.mark.parametrize("causal", [False, True])
def test_sliding_chunks_with_the_fused_mask_equals_the_eager_mask_exactly(causal, monkeypatch):
    """The PyTorch path with dropout gives the same output and gradients, bit for bit, with the
    fused keep mask and with the eager passes (padding, and global tokens where not causal)."""
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 3, 300, 8, generator=gen).requires_grad_() for _ in range(6)]  # q, k, v, q_g, k_g, v_g
    grad_out = torch.randn(2, 3, 300, 8, generator=gen)
    is_global = None if causal else (torch.arange(300) % 97 == 0).expand(2, -1)  # causal has none
    masks = AttentionMasks(padding=torch.arange(300).expand(2, -1) >= torch.tensor([[300], [270]]),
                           is_global=is_global)
    _require_fused()
    calls = {"keep_times": 0, "softmax_grad_": 0}

    def counted(name):
        original = getattr(fused_keep, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)
        return wrapper

    for name in calls:
        monkeypatch.setattr(fused_keep, name, counted(name))
    results, used_loops = [], []
    for fused in (False, True):
        monkeypatch.setattr(fused_keep, "ENABLED", fused)
        before = dict(calls)
        out = sliding_chunks_attention(*inputs[:3], *(inputs[3:] if is_global is not None else [None] * 3),
                                       AttentionPattern(20, causal=causal), masks,
                                       dropout=AttentionDropout(0.2, 11))
        used = inputs if is_global is not None else inputs[:3]
        results.append([out.detach()] + list(torch.autograd.grad(out, used, grad_out)))
        used_loops.append({name: calls[name] - before[name] for name in calls})
    # the eager round ran no loop, the fused round ran both (forward and backward): the two
    # results below really come from different code
    assert all(n == 0 for n in used_loops[0].values()) and all(n > 0 for n in used_loops[1].values()), used_loops
    for eager, fused in zip(*results):
        assert torch.equal(eager, fused)
