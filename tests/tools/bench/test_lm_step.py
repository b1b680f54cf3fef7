"""The char-LM step benchmark (``python -m longformer_tools.cli.bench_lm``): what it computes and
prints, never how fast it is.

One smoke run at a tiny length checks the printed table and the JSON; a run whose dense masks are
one key too wide checks that the loss comparison stops the benchmark before anything is timed;
the dense contender's mask and attention are checked against the attention core's reference.
"""
import json
import subprocess
import sys

import pytest
import torch

from longformer_tools.bench import lm_step
from longformer_tools.bench.lm_step import DenseCausalSelfAttention, LMStepCase, causal_dilated_mask
from longformer_kernels import AttentionMasks, AttentionPattern
from longformer_kernels.reference import allowed_keys

LENGTH = 64


def _bench(out_dir, *extra):
    command = [sys.executable, "-m", "longformer_tools.cli.bench_lm", "--lengths", str(LENGTH), "--repeats", "1",
               "--threads", "1", "--out-dir", str(out_dir), "--name", "smoke", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("positions", [[], ["--relative-positions"]], ids=["learned", "relative"])
def test_smoke_run_prints_both_models_and_the_ratios(tmp_path, positions):
    completed = _bench(tmp_path, *positions)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads((tmp_path / "smoke.json").read_text())
    check = report["loss_checks"][str(LENGTH)]
    assert check["difference"] <= 1e-4 and check["longformer_loss"] > 0
    assert 0 <= check["max_logit_difference"] < 1e-4  # the same function, not only the same mean
    rows = {row["impl"]: row for row in report["results"]}
    assert set(rows) == {"longformer", "dense"}
    for row in rows.values():
        assert row["status"] == "ok" and row["length"] == LENGTH, row
        assert len(row["fwd_bwd_ms_all"]) == 1 and row["fwd_bwd_ms"] > 0 and row["fwd_ms"] > 0
        assert row["peak_fwd_bwd_mb"] is not None and row["peak_fwd_mb"] is not None
    # speedup = dense time / Longformer time, memory ratio = Longformer peak / dense peak
    ratios, longformer, dense = rows["longformer"]["ratios"], rows["longformer"], rows["dense"]
    assert ratios["fwd_bwd_speedup"] == pytest.approx(dense["fwd_bwd_ms"] / longformer["fwd_bwd_ms"])
    assert ratios["fwd_speedup"] == pytest.approx(dense["fwd_ms"] / longformer["fwd_ms"])
    if dense["peak_fwd_bwd_mb"]:
        assert ratios["fwd_bwd_mem_ratio"] == pytest.approx(longformer["peak_fwd_bwd_mb"] / dense["peak_fwd_bwd_mb"])
    if dense["peak_fwd_mb"]:
        assert ratios["fwd_mem_ratio"] == pytest.approx(longformer["peak_fwd_mb"] / dense["peak_fwd_mb"])
    assert dense["ratios"] == {}
    # the printed table is the one of these rows, after the loss check's line
    assert lm_step.format_rows(report["results"]) in completed.stdout
    assert f"N={LENGTH}: loss longformer" in completed.stdout
    assert report["settings"]["relative_positions"] == bool(positions)


def test_a_wrong_dense_mask_fails_the_loss_check_before_timing(tmp_path):
    completed = _bench(tmp_path, "--dense-window-offset", "1")
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "the two models disagree" in completed.stderr
    assert "timing" not in completed.stdout and not (tmp_path / "smoke.json").exists()


@pytest.mark.parametrize("window,dilation", [(0, 1), (3, 1), (3, 2), (2, 4), (20, 3)])
def test_dense_mask_is_the_causal_dilated_pattern(window, dilation):
    length = 17
    pattern = AttentionPattern(window=window, dilation=(dilation,), causal=True)
    none = [False] * length
    expected = allowed_keys(pattern, dilation, none, none)
    assert torch.equal(causal_dilated_mask(length, window, dilation), expected)


def test_dense_attention_computes_the_longformer_layer():
    """Same parameters, same input: the dense stand-in and the layer's own attention agree."""
    case = LMStepCase(impl="longformer", length=40, global_tokens=0, heads=4, head_dim=8)
    model, _ = lm_step.build_lm(case)
    attention = model.decoder.layers[-1].self_attn  # the top layer: dilation on 2 of 4 heads
    assert len(set(attention.config.pattern.dilation_per_head(4))) == 2
    dense = DenseCausalSelfAttention(attention)
    assert dense.q_proj is attention.q_proj  # the same parameters, not copies
    x = torch.randn(40, 2, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = attention(x, x, x, key_padding_mask=AttentionMasks())[0]
        torch.testing.assert_close(dense(x)[0], expected, rtol=0, atol=1e-5)


def test_dense_relative_positions_compute_the_longformer_layer():
    """With relative positions the dense stand-in builds Transformer-XL's (N, N) position scores
    (all distances, relative shift, window as -inf) from the same W_R, u, v: outputs and the
    gradients of every shared parameter equal the layer's band computation."""
    case = LMStepCase(impl="longformer", length=40, global_tokens=0, heads=4, head_dim=8, relative_positions=True)
    model, _ = lm_step.build_lm(case)
    model = model.double()
    attention = model.decoder.layers[-1].self_attn
    assert len(set(attention.config.pattern.dilation_per_head(4))) == 2
    dense = DenseCausalSelfAttention(attention)
    rel = attention.relative_positions
    with torch.no_grad():  # u and v start near 0: make them matter
        rel.biases.content_bias.normal_(std=0.5)
        rel.biases.position_bias.normal_(std=0.5)
    x = torch.randn(40, 2, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    weights = [rel.r_proj.weight, rel.biases.content_bias, rel.biases.position_bias, attention.q_proj.weight]
    results = []
    for module in (attention, dense):
        out = module(x, x, x, key_padding_mask=None)[0]
        results.append((out, torch.autograd.grad(out.pow(2).sum(), weights)))
    (want, want_grads), (got, got_grads) = results
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for name, a, b in zip(("W_R", "u", "v", "W_q"), got_grads, want_grads):
        assert b.abs().max() > 1e-3, name
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=lambda m: f"gradient of {name}: {m}")
