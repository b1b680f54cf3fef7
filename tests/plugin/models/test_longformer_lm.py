"""``longformer_lm`` (models/longformer_lm.py): built through fairseq's registries, equal to
fairseq's own ``transformer_lm`` given the same weights and the Longformer pattern as a dense
mask, and its step-by-step decoding (modules/incremental.py) equal to the full forward with a
cache that stays bounded."""
import argparse

import pytest
import torch
from fairseq import search
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.sequence_generator import SequenceGenerator

from longformer_kernels import AttentionPattern
from longformer_kernels.reference import allowed_keys
from fairseq_longformer.models.longformer_lm import LongformerLanguageModel, paper_dilation
from fairseq_longformer.modules.incremental import IncrementalLongformerSelfAttention
from fairseq_longformer.modules.self_attention import LongformerAttentionConfig, LongformerSelfAttention

from tests.support.charlm import TINY, CharTask, build_lm, characters


def _arch(name, **overrides):
    args = argparse.Namespace(tokens_per_sample=2048, **overrides)
    ARCH_CONFIG_REGISTRY[name](args)
    return args


def _expand(ranges, heads=8):
    """The paper's table, '(gap, first layer, last layer)' runs, as d per layer and head with
    the last two heads dilated: written out here independently of ``paper_dilation``."""
    out = []
    for gap, first, last in ranges:
        out += [(1,) * (heads - 2) + (gap + 1,) * 2] * (last - first + 1)
    return tuple(out)


def test_architectures_are_the_papers():
    small, large = _arch("longformer_lm_small"), _arch("longformer_lm_large")
    assert (small.decoder_layers, small.decoder_embed_dim, small.decoder_attention_heads, small.dropout) == (12, 512, 8, 0.2)
    assert (large.decoder_layers, large.decoder_embed_dim, large.decoder_attention_heads, large.dropout) == (30, 512, 8, 0.4)
    for args in (small, large):
        assert args.activation_fn == "gelu" and args.decoder_normalize_before and args.attention_causal
        windows = [int(w) for w in args.attention_window.split(",")]
        assert windows[0] == 32 and windows == sorted(windows) and windows[-1] == 2048  # capped at N
    # appendix B: gap 0 (layers 0-5), 1 (6-7), 2 (8-9), 3 (10-11); large 0-14, 15-19, 20-24, 25-29
    assert paper_dilation(12, 8) == _expand([(0, 0, 5), (1, 6, 7), (2, 8, 9), (3, 10, 11)])
    assert paper_dilation(30, 8) == _expand([(0, 0, 14), (1, 15, 19), (2, 20, 24), (3, 25, 29)])
    assert small.attention_dilation.split(",")[6] == "1:1:1:1:1:1:2:2"
    # the built model: causal Longformer attention in every layer, with those patterns
    model = ARCH_MODEL_REGISTRY["longformer_lm_small"].build_model(small, CharTask())
    assert isinstance(model, LongformerLanguageModel)
    attn = [layer.self_attn for layer in model.decoder.layers]
    assert all(isinstance(a, IncrementalLongformerSelfAttention) for a in attn) and len(attn) == 12
    assert [a.config.pattern.dilation for a in attn] == list(paper_dilation(12, 8))
    assert all(a.config.pattern.causal and not a.config.global_projections for a in attn)


def _stock_lm(ours, task, **overrides):
    """fairseq's own transformer_lm with the same flags and our weights (loaded strictly)."""
    args = argparse.Namespace(**{**TINY, **overrides})
    ARCH_CONFIG_REGISTRY["longformer_lm"](args)  # the same defaults (gelu, learned positions, tied)
    args.arch = "transformer_lm"
    stock = ARCH_MODEL_REGISTRY["transformer_lm"].build_model(args, task).to(torch.float64).eval()
    stock.load_state_dict(ours.state_dict(), strict=True)
    return stock


def _dense_mask(attention, length, batch):
    """The layer's Longformer pattern as fairseq's (B * H, N, N) additive mask, from the reference's
    ``allowed_keys``."""
    pattern, heads = attention.config.pattern, attention.num_heads
    no = [False] * length
    allowed = torch.stack([allowed_keys(pattern, d, no, no) for d in pattern.dilation_per_head(heads)])
    mask = torch.zeros(allowed.shape, dtype=torch.float64).masked_fill_(~allowed, float("-inf"))
    return mask.repeat(batch, 1, 1)


def test_full_forward_equals_fairseq_transformer_lm_with_the_pattern_as_a_dense_mask():
    model, task = build_lm()
    stock = _stock_lm(model, task)
    tokens = characters(task, 2, 40)
    for ours, theirs in zip(model.decoder.layers, stock.decoder.layers):
        mask = _dense_mask(ours.self_attn, 40, 2)
        forward = theirs.self_attn.forward
        theirs.self_attn.forward = lambda *a, attn_mask=None, _f=forward, _m=mask, **k: _f(*a, attn_mask=_m, **k)
    torch.testing.assert_close(model(tokens)[0], stock(tokens)[0], atol=1e-10, rtol=1e-10)


def test_window_covering_the_sequence_is_fairseq_transformer_lm():
    """w >= N - 1 without dilation is full causal attention: fairseq's model, unpatched."""
    model, task = build_lm(attention_window="39", attention_dilation="1")
    stock = _stock_lm(model, task, attention_window="39", attention_dilation="1")
    tokens = characters(task, 3, 40, seed=1)
    torch.testing.assert_close(model(tokens)[0], stock(tokens)[0], atol=1e-10, rtol=1e-10)
    # and the banded model above is not that model (the comparison can tell them apart)
    banded, _ = build_lm()
    assert (banded(tokens)[0] - stock(tokens)[0]).abs().max() > 1e-3


def test_no_future_mask_is_made_or_passed():
    """fairseq's decoder would make and keep an (N, N) float future mask (1 GiB at 16,384): the
    Longformer decoder makes none and its layers get attn_mask=None (the pattern is causal)."""
    model, task = build_lm()
    seen = []
    for layer in model.decoder.layers:
        forward = layer.self_attn.forward
        layer.self_attn.forward = lambda *a, _f=forward, **k: seen.append(k.get("attn_mask")) or _f(*a, **k)
    model(characters(task, 2, 40))
    assert len(seen) == len(model.decoder.layers) and all(mask is None for mask in seen)
    assert model.decoder._future_mask.numel() == 0


def _cache_lengths(model, state):
    return [layer.self_attn._get_input_buffer(state)["prev_key"].shape[2] for layer in model.decoder.layers]


def test_cached_steps_equal_the_full_forward_and_the_cache_stays_bounded():
    model, task = build_lm()
    tokens = characters(task, 2, 40)
    full = model(tokens)[0]
    spans = [layer.self_attn.cache_span for layer in model.decoder.layers]
    assert spans == [2 * 1, 3 * 2, 5 * 3]  # w * max(d) of "2,3,5" / "1,1:1:2:2,1:2:3:3"
    state = {}
    for t in range(40):
        # fairseq's decoder feeds the whole prefix and keeps only its last token
        step = model.decoder(tokens[:, : t + 1], incremental_state=state)[0]
        torch.testing.assert_close(step[:, -1], full[:, t], atol=1e-9, rtol=1e-9)
        assert _cache_lengths(model, state) == [min(t + 1, s) for s in spans]
    # memory does not grow with the generated length: 40 steps keep what 15 did
    assert max(_cache_lengths(model, state)) == 15 < 40


def test_a_prompt_in_one_call_then_steps_equal_the_full_forward():
    """A first call may carry T > 1 new positions (a prompt) through the attention directly."""
    model, task = build_lm()
    tokens = characters(task, 2, 30, seed=2)
    full = model(tokens)[0]
    state = {}
    x = model.decoder.embed_tokens(tokens) * model.decoder.embed_scale
    x = (x + model.decoder.embed_positions(tokens)).transpose(0, 1)  # (N, B, C)
    layer = model.decoder.layers[2]
    attn = layer.self_attn
    want, _ = attn(x, key_padding_mask=None, attn_mask=None)
    first, _ = attn(x[:17], incremental_state=state)
    rest = [attn(x[t: t + 1], incremental_state=state)[0] for t in range(17, 30)]
    torch.testing.assert_close(torch.cat([first] + rest), want, atol=1e-10, rtol=1e-10)
    assert full.shape == (2, 30, len(task.source_dictionary))


@pytest.mark.parametrize("relative", [False, True], ids=["learned", "relative"])
def test_reordering_the_cache_follows_the_beams(relative):
    model, task = build_lm(relative_positions=relative)
    tokens = characters(task, 3, 20, seed=3)
    order = torch.tensor([2, 0, 0])
    state = {}
    for t in range(10):
        model.decoder(tokens[:, : t + 1], incremental_state=state)
    model.decoder.reorder_incremental_state_scripting(state, order)
    moved = tokens[order]
    full = model(moved)[0]
    for t in range(10, 20):
        step = model.decoder(moved[:, : t + 1], incremental_state=state)[0]
        torch.testing.assert_close(step[:, -1], full[:, t], atol=1e-9, rtol=1e-9)


def test_fairseq_sequence_generator_greedy_equals_argmax_of_full_forwards_and_sampling_runs():
    model, task = build_lm(tokens_per_sample=64)
    d = task.target_dictionary
    prompt = characters(task, 1, 6, seed=4)[:, 1:]  # fairseq's generator puts </s> in front itself
    sample = {"net_input": {"src_tokens": prompt, "src_lengths": torch.tensor([5])}}
    greedy = SequenceGenerator([model], d, beam_size=1, max_len_b=30, min_len=30)
    hypo = greedy.generate([model], sample, prefix_tokens=prompt)[0][0]
    # the same decoding by hand, one full forward per step (no cache): </s> + prompt, then argmax
    seq = torch.cat([torch.tensor([[d.eos()]]), prompt], dim=1)
    while seq.shape[1] < 31:
        logits = model(seq)[0][0, -1].clone()
        logits[[d.pad(), d.eos()]] = float("-inf")  # as fairseq: never pad; min_len forbids </s>
        seq = torch.cat([seq, logits.argmax().view(1, 1)], dim=1)
    assert hypo["tokens"][:30].tolist() == seq[0, 1:].tolist()
    log_probs = torch.log_softmax(model(seq)[0][0, 5:-1], dim=-1)
    torch.testing.assert_close(hypo["positional_scores"][5:30].double(),
                               log_probs.gather(1, seq[0, 6:, None]).squeeze(1), atol=1e-5, rtol=1e-5)  # fp32 scores

    torch.manual_seed(0)
    sampler = SequenceGenerator([model], d, beam_size=2, max_len_b=40, min_len=40,
                                search_strategy=search.Sampling(d, sampling_topk=5))  # fairseq-generate --sampling
    hypos = sampler.generate([model], sample)[0]
    assert len(hypos) == 2 and all(len(h["tokens"]) == 41 for h in hypos)  # 40 + the final </s>


def test_clear_errors():
    task = CharTask()
    with pytest.raises(ValueError, match="larger than the model's 64 positions"):
        build_lm(task, attention_window="2,3,100")
    with pytest.raises(ValueError, match="on 2 heads, but the model has 1 head"):
        build_lm(task, decoder_attention_heads=1, attention_dilation=None)
    with pytest.raises(ValueError, match="gives 3 values but the layer has 4 heads"):
        build_lm(task, attention_dilation="1:1:2")
    with pytest.raises(ValueError, match="--adaptive-input"):
        build_lm(task, adaptive_input=True)
    model, _ = build_lm(task)
    attn = model.decoder.layers[0].self_attn
    x = torch.randn(1, 2, 32, dtype=torch.float64)
    with pytest.raises(ValueError, match="padding"):
        attn(x, key_padding_mask=torch.tensor([[True], [False]]), incremental_state={})
    dropped, _ = build_lm(task, attention_dropout=0.1)
    with pytest.raises(ValueError, match="model.eval"):
        dropped.decoder.layers[0].self_attn.train()(x, incremental_state={})
    with pytest.raises(ValueError, match="causal"):
        IncrementalLongformerSelfAttention(32, 4, LongformerAttentionConfig(AttentionPattern(2)))
    # the encoders' module has no step-by-step decoding, and says where it is
    plain = LongformerSelfAttention(32, 4, LongformerAttentionConfig(AttentionPattern(2, causal=True),
                                                                     global_projections=False))
    with pytest.raises(NotImplementedError, match="IncrementalLongformerSelfAttention"):
        plain(x.float(), incremental_state={})
