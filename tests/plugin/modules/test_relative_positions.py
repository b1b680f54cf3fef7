"""Relative positions (``--relative-positions``, modules/relative_positions.py): Transformer-XL's
relative attention on the causal dilated window, against an independent dense implementation
written here (outputs and the gradients of u, v, W_R, the projections and the input) through
every attention implementation; the model built with them (no position table, u and v shared
by the layers, logits that do not depend on the absolute position, cached decoding equal to
the full forward); and clear errors. (Causality with relative positions: test_causality.py;
fairseq-train / fairseq-eval-lm at 4x the training length: test_relative_positions_cli.py.)"""
import argparse
import dataclasses

import pytest
import torch
import torch.nn.functional as F
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.sequence_generator import SequenceGenerator

from longformer_kernels import AttentionPattern
from fairseq_longformer.modules import relative_positions
from fairseq_longformer.modules.incremental import IncrementalLongformerSelfAttention
from fairseq_longformer.modules.relative_positions import RelativePositionBiases
from fairseq_longformer.modules.self_attention import LongformerAttentionConfig, LongformerSelfAttention

from tests.support.charlm import TINY, CharTask, build_lm, characters

IMPLS = ["reference", "torch", "triton"]


def xl_sinusoid(delta: torch.Tensor, dim: int) -> torch.Tensor:
    """Transformer-XL's r_delta, one frequency at a time: (...) -> (..., dim), float64.
    First half sin(delta / 10000 ** (2k / dim)), second half the cosines (its PositionalEmbedding)."""
    out = torch.zeros(delta.shape + (dim,), dtype=torch.float64)
    for k in range(dim // 2):
        angle = delta.double() / 10000.0 ** (2 * k / dim)
        out[..., k] = torch.sin(angle)
        out[..., dim // 2 + k] = torch.cos(angle)
    return out


def dense_transformer_xl(attn, x, padding=None):
    """The module's function written densely from Transformer-XL's formula, in float64:
    score(i, j) = scale * [(q_i + u) . k_j + (q_i + v) . W_R r_{i-j}] over the keys j with
    i - j = s * d_h, 0 <= s <= w (the causal dilated window), not padding; a padding query's row
    is zero; then the output projection. x: (N, B, C) -> (N, B, C). Every (i, j) pair gets its
    own r_{i-j} from an (N, N) matrix of distances: nothing of the module's band layout is used."""
    length, batch, dim = x.shape
    heads = attn.num_heads
    head_dim = dim // heads
    rel = attn.relative_positions
    x = x.double()

    def linear(m, inp):
        return F.linear(inp, m.weight.double(), None if m.bias is None else m.bias.double())

    q, k, v = (linear(m, x).view(length, batch, heads, head_dim) for m in (attn.q_proj, attn.k_proj, attn.v_proj))
    u, pos_v = rel.biases.content_bias.double(), rel.biases.position_bias.double()
    w_r = rel.r_proj.weight.double().view(heads, head_dim, dim)
    positions = torch.arange(length)
    delta = positions[:, None] - positions[None, :]  # (N, N): i - j
    r = torch.einsum("ijc,hdc->ijhd", xl_sinusoid(delta, dim), w_r)  # W_R r_{i-j} per head, (N, N, H, D)
    content = torch.einsum("ibhd,jbhd->bhij", q + u, k)
    position = torch.einsum("ibhd,ijhd->bhij", q + pos_v, r)
    scores = (content + position) * head_dim ** -0.5  # (B, H, N, N)
    pad = torch.zeros(batch, length, dtype=torch.bool) if padding is None else padding
    allowed = torch.zeros(batch, heads, length, length, dtype=torch.bool)
    for h, d in enumerate(attn.config.pattern.dilation_per_head(heads)):
        window = (delta >= 0) & (delta % d == 0) & (delta <= attn.config.pattern.window * d)
        allowed[:, h] = window & ~pad[:, None, :]
    # a padding query's row has no key: give it one to keep the softmax (and its gradient) free of
    # NaN; the row is zeroed below
    allowed |= torch.eye(length, dtype=torch.bool) & pad[:, None, :, None]
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    out = torch.einsum("bhij,jbhd->ibhd", probs, v)
    out = out.masked_fill(pad.t()[:, :, None, None], 0.0).reshape(length, batch, dim)
    return linear(attn.out_proj, out)


def _relative_attention(impl, window, dilation, dtype, heads=4, dim=32):
    torch.manual_seed(0)
    config = LongformerAttentionConfig(AttentionPattern(window, dilation, causal=True), impl=impl,
                                       global_projections=False, relative_positions=True)
    attn = IncrementalLongformerSelfAttention(dim, heads, config).to(dtype)
    with torch.no_grad():  # u and v start near 0 (Transformer-XL's init): make them matter here
        attn.relative_positions.biases.content_bias.normal_(std=0.5)
        attn.relative_positions.biases.position_bias.normal_(std=0.5)
    return attn


def _gradients(attn, x, out):
    """Gradients of a fixed random projection of ``out`` w.r.t. the input and every weight that
    the relative positions touch (u, v, W_R) or feed (q, k, v projections)."""
    rel = attn.relative_positions
    named = {"x": x, "u": rel.biases.content_bias, "v": rel.biases.position_bias, "W_R": rel.r_proj.weight,
             "W_q": attn.q_proj.weight, "W_k": attn.k_proj.weight, "W_v": attn.v_proj.weight}
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads = torch.autograd.grad((out.double() * weight).sum(), list(named.values()))
    return dict(zip(named, grads))


# (N, w, per-head dilation, padded positions at the end of row 0): windows shorter than N with
# dilations up to 3, a window longer than the sequence, and right padding as fairseq pads LM batches
CASES = [(37, 4, (1, 2, 3, 1), 0), (37, 4, (1, 1, 2, 3), 6), (13, 20, (1, 2, 1, 2), 3)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("length,window,dilation,padded", CASES)
def test_attention_equals_dense_transformer_xl_relative_attention(impl, length, window, dilation, padded):
    # Triton computes in fp16/bf16/fp32 only: fp32 here, against the float64 dense version (the
    # PyTorch path in fp32 is off by as much: 2e-7 in the outputs, 3e-6 in the gradients)
    dtype = torch.float32 if impl == "triton" else torch.float64
    attn = _relative_attention(impl, window, dilation, dtype)
    _assert_equals_dense_transformer_xl(attn, length, padded, dtype, impl)


def _assert_equals_dense_transformer_xl(attn, length, padded, dtype, label):
    """``attn`` on a (length, 2, 32) input whose row 0 ends in ``padded`` padding positions equals
    ``dense_transformer_xl``: the real rows' outputs, and every gradient of ``_gradients`` (each
    nonzero)."""
    tol = 2e-6 if dtype == torch.float32 else 1e-10
    x = torch.randn(length, 2, 32, generator=torch.Generator().manual_seed(2), dtype=dtype).requires_grad_()
    padding = torch.zeros(2, length, dtype=torch.bool)
    padding[0, length - padded:] = padded > 0
    real = ~padding.t()  # (N, B): compare the rows of real tokens (a padding row is only out_proj's bias)

    out, _ = attn(x, key_padding_mask=padding if padded else None)
    want = dense_transformer_xl(attn, x, padding)
    torch.testing.assert_close(out[real].double(), want[real], atol=tol, rtol=tol)
    got_grads = _gradients(attn, x, out.masked_fill(~real[..., None], 0))
    want_grads = _gradients(attn, x, want.masked_fill(~real[..., None], 0))
    for name, got in got_grads.items():
        assert got.abs().max() > 1e-3, f"{name} gets no gradient"
        torch.testing.assert_close(got.double(), want_grads[name].double(), atol=tol * 10, rtol=tol * 10,
                                   msg=lambda m: f"{label}: gradient of {name}: {m}")


@pytest.mark.parametrize("impl", IMPLS)
def test_heads_in_checkpointed_groups_equal_the_dense_version(impl, monkeypatch):
    """A band bias over the budget: heads attended in groups (here 1 + 1 + 1 + 1 and 3 + 1), each
    group's bias made inside a checkpoint; outputs and every gradient still Transformer-XL's."""
    length, window, dilation, padded = CASES[1]
    dtype = torch.float32 if impl == "triton" else torch.float64
    per_head = 2 * length * (window + 1) * torch.tensor([], dtype=dtype).element_size()
    calls = _count_core_calls(monkeypatch)
    for group in (1, 3):
        attn = _relative_attention(impl, window, dilation, dtype)
        attn.relative_positions.bias_budget_bytes = group * per_head
        calls.clear()
        _assert_equals_dense_transformer_xl(attn, length, padded, dtype, f"{impl}, groups of {group}")
        forward = [min(group, 4 - i) for i in range(0, 4, group)]  # heads per call
        assert calls[:len(forward)] == forward, calls
        assert len(calls) == 2 * len(forward), calls  # each group's attention ran again in backward


def _count_core_calls(monkeypatch):
    """Record the number of heads of every attention-core call the relative positions make."""
    calls = []
    core = relative_positions.longformer_attention

    def counting(q, *args, **kwargs):
        calls.append(q.shape[1])
        return core(q, *args, **kwargs)

    monkeypatch.setattr(relative_positions, "longformer_attention", counting)
    return calls


def _largest_saved_for_backward(attn, x):
    """numel of the largest tensor autograd keeps from the forward (outside checkpoints)."""
    sizes = [0]

    def pack(tensor):
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attn(x)
    return max(sizes)


def test_over_the_budget_no_band_bias_is_kept_for_backward(monkeypatch):
    """The point of the groups: within the budget band-sized tensors, (B, H, N, ~w), are kept for
    backward (the check can tell); over it, nothing larger than the input is kept, and no dropout
    mask repeats across groups."""
    length, window = 96, 64
    attn = _relative_attention("torch", window, (1, 1, 2, 3), torch.float64)
    x = torch.randn(length, 2, 32, dtype=torch.float64, requires_grad=True)
    # band-sized (the core's probabilities, about B * H * N * w): 8x the input here
    assert _largest_saved_for_backward(attn, x) > 4 * x.numel()
    attn.relative_positions.bias_budget_bytes = 1
    assert _largest_saved_for_backward(attn, x) <= x.numel()

    seeds = []
    core = relative_positions.longformer_attention
    monkeypatch.setattr(relative_positions, "longformer_attention",
                        lambda *a, **k: seeds.append(k["dropout"].seed) or core(*a, **k))
    attn.config = dataclasses.replace(attn.config, dropout=0.1)
    attn.train()
    attn(x)
    assert len(seeds) == 4 and len(set(seeds)) == 4


def test_dense_version_can_tell_the_position_term_apart():
    """The dense check above is not blind to the position term: without it (or with the
    distance's sign flipped) the outputs differ by far more than the tolerance."""
    attn = _relative_attention("torch", 4, (1, 1, 2, 3), torch.float64)
    x = torch.randn(37, 2, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out = attn(x)[0]
    with torch.no_grad():
        attn.relative_positions.r_proj.weight.zero_()
        attn.relative_positions.biases.position_bias.zero_()
    assert (attn(x)[0] - out).abs().max() > 1e-2


def _learned_and_relative(**overrides):
    learned, task = build_lm(**overrides)
    relative, _ = build_lm(task, relative_positions=True, **overrides)
    return learned, relative, task


def test_the_relative_model_has_no_position_table_no_length_limit_and_one_u_v():
    learned, relative, task = _learned_and_relative()
    # learned positions stay the default, with fairseq's limit
    assert learned.decoder.embed_positions is not None and learned.max_positions() == 64
    assert all(layer.self_attn.relative_positions is None for layer in learned.decoder.layers)
    # relative: no table, no limit, W_R per layer, u and v one pair for every layer
    assert relative.decoder.embed_positions is None and relative.max_positions() >= 2 ** 31
    terms = [layer.self_attn.relative_positions for layer in relative.decoder.layers]
    assert len({id(t.biases) for t in terms}) == 1 and len({id(t.r_proj) for t in terms}) == 3
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731  (shared parameters once)
    table = learned.decoder.embed_positions.weight.numel()
    assert count(relative) == count(learned) - table + 3 * 32 * 32 + 2 * 4 * 8
    # the shared u gets the gradient of every layer
    relative.train()
    relative(characters(task, 2, 20))[0].sum().backward()
    layer_grads = terms[0].biases.content_bias.grad
    assert layer_grads is not None and layer_grads.abs().max() > 0


def test_logits_do_not_depend_on_the_absolute_position():
    """With relative positions, a position whose reach (the sum over layers of w * max d: 2 + 6
    + 15 = 23 here) lies inside the sequence gets the same logits wherever the sequence starts:
    the model evaluates at lengths and offsets it never trained on. Learned positions do not."""
    learned, relative, task = _learned_and_relative()
    tokens = characters(task, 2, 60, seed=5)
    with torch.no_grad():
        for model, invariant in ((relative, True), (learned, False)):
            full = model(tokens)[0][:, 30 + 23:]
            shifted = model(tokens[:, 30:])[0][:, 23:]  # the same characters, 30 positions earlier
            err = (full - shifted).abs().max().item()
            assert (err < 1e-12) if invariant else (err > 1e-3), err


def test_a_longer_sequence_than_training_runs_and_stays_finite():
    """4x tokens_per_sample (64): nothing limits the length, and the logits stay finite."""
    _, relative, task = _learned_and_relative()
    with torch.no_grad():
        logits = relative(characters(task, 1, 256, seed=6))[0]
    assert logits.shape[1] == 256 and torch.isfinite(logits).all()


def test_cached_steps_equal_the_full_forward():
    model, task = build_lm(relative_positions=True)
    tokens = characters(task, 2, 40, seed=7)
    full = model(tokens)[0]
    state = {}
    errors = []
    for t in range(40):
        step = model.decoder(tokens[:, : t + 1], incremental_state=state)[0]
        errors.append((step[:, -1] - full[:, t]).abs().max().item())
    assert max(errors) < 1e-10, max(errors)
    lengths = [layer.self_attn._get_input_buffer(state)["prev_key"].shape[2] for layer in model.decoder.layers]
    assert lengths == [2, 6, 15]  # the bounded cache: w * max(d) per layer


def test_a_prompt_in_one_call_then_steps_equal_the_full_forward():
    model, task = build_lm(relative_positions=True)
    tokens = characters(task, 2, 30, seed=8)
    x = (model.decoder.embed_tokens(tokens) * model.decoder.embed_scale).transpose(0, 1)  # (N, B, C)
    attn = model.decoder.layers[2].self_attn
    want, _ = attn(x)
    state = {}
    first, _ = attn(x[:17], incremental_state=state)
    rest = [attn(x[t: t + 1], incremental_state=state)[0] for t in range(17, 30)]
    torch.testing.assert_close(torch.cat([first] + rest), want, atol=1e-12, rtol=1e-12)


def test_fairseq_generator_decodes_beyond_the_training_length():
    """fairseq's SequenceGenerator (what fairseq-generate / -interactive run) with the cache, to
    twice tokens_per_sample: greedy equals the argmax of full forwards."""
    model, task = build_lm(relative_positions=True)
    d = task.target_dictionary
    prompt = characters(task, 1, 6, seed=9)[:, 1:]  # fairseq's generator puts </s> in front itself
    sample = {"net_input": {"src_tokens": prompt, "src_lengths": torch.tensor([5])}}
    length = 2 * TINY["tokens_per_sample"]
    generator = SequenceGenerator([model], d, beam_size=1, max_len_b=length, min_len=length)
    hypo = generator.generate([model], sample, prefix_tokens=prompt)[0][0]
    seq = torch.cat([torch.tensor([[d.eos()]]), prompt], dim=1)
    with torch.no_grad():
        while seq.shape[1] < length + 1:
            logits = model(seq)[0][0, -1].clone()
            logits[[d.pad(), d.eos()]] = float("-inf")  # as fairseq: never pad; min_len forbids </s>
            seq = torch.cat([seq, logits.argmax().view(1, 1)], dim=1)
    assert hypo["tokens"][:length].tolist() == seq[0, 1:].tolist()


def test_architecture_flag_and_clear_errors():
    args = argparse.Namespace(tokens_per_sample=2048, relative_positions=True)
    ARCH_CONFIG_REGISTRY["longformer_lm_small"](args)
    assert args.no_token_positional_embeddings  # the positions are in the attention
    plain = argparse.Namespace(tokens_per_sample=2048)
    ARCH_CONFIG_REGISTRY["longformer_lm_small"](plain)
    assert not plain.relative_positions and not plain.no_token_positional_embeddings

    with pytest.raises(ValueError, match="relative positions need a causal pattern"):
        LongformerAttentionConfig(AttentionPattern(2), global_projections=False, relative_positions=True)
    config = LongformerAttentionConfig(AttentionPattern(2, causal=True), global_projections=False)
    with pytest.raises(ValueError, match="without relative positions"):
        LongformerSelfAttention(32, 4, config, relative_biases=RelativePositionBiases(4, 8))
    relative = LongformerAttentionConfig(AttentionPattern(2, causal=True), global_projections=False,
                                         relative_positions=True)
    with pytest.raises(ValueError, match="biases of shape"):
        LongformerSelfAttention(32, 4, relative, relative_biases=RelativePositionBiases(2, 16))
    with pytest.raises(ValueError, match="fully_sharded"):
        build_lm(relative_positions=True, ddp_backend="fully_sharded")
    # --relative-bias-budget-mb reaches every layer; alone, it is refused
    budgeted, _ = build_lm(relative_positions=True, relative_bias_budget_mb=0.5)
    assert {layer.self_attn.relative_positions.bias_budget_bytes for layer in budgeted.decoder.layers} == {2 ** 19}
    with pytest.raises(ValueError, match="applies to --relative-positions only"):
        build_lm(relative_bias_budget_mb=0.5)
    with pytest.raises(ValueError, match="must be > 0"):
        LongformerAttentionConfig(AttentionPattern(2, causal=True), global_projections=False,
                                  relative_positions=True, relative_bias_budget_mb=0)
    # a fairseq namespace (as a checkpoint stores it) without the flag builds learned positions
    old = argparse.Namespace(**TINY)
    ARCH_CONFIG_REGISTRY["longformer_lm"](old)
    model = ARCH_MODEL_REGISTRY["longformer_lm"].build_model(old, CharTask())
    assert model.decoder.embed_positions is not None
