"""The LED model (models/led.py) against the stock fairseq BART it was converted from.

Every model here is loaded the way fairseq-generate loads one (``load_model_ensemble_and_task``),
from the session's tiny BART (2 + 2 layers, 32 wide, 32 positions) and its conversion to 128
encoder positions with a one-sided window of 32.
"""
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.sequence_generator import SequenceGenerator

from fairseq_longformer.models.led import LEDEncoder, LEDModel, first_token_global
from fairseq_longformer.modules.self_attention import LongformerSelfAttention

from tests.support.led_models import LED_POSITIONS, SOURCE_POSITIONS


def load_model(path, data_bin, dtype=torch.float64, **overrides):
    """(model in eval mode and ``dtype``, task), as fairseq's generate builds them."""
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides={"data": str(data_bin), **overrides})
    return models[0].eval().to(dtype), task


def source_batch(dictionary, lengths, seed=0):
    """(B, N) source tokens LEFT-padded as fairseq's translation task pads them, each row ending
    in </s>; N = max(lengths). Returns (src_tokens, src_lengths)."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    tokens = torch.full((len(lengths), width), dictionary.pad(), dtype=torch.long)
    for row, n in enumerate(lengths):
        tokens[row, width - n:] = torch.randint(dictionary.nspecial, len(dictionary), (n,), generator=g)
        tokens[row, -1] = dictionary.eos()
    return tokens, torch.tensor(lengths)


def prev_output(dictionary, batch, length, seed=1):
    g = torch.Generator().manual_seed(seed)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (batch, length), generator=g)
    prev[:, 0] = dictionary.eos()  # fairseq's decoder input starts with </s>
    return prev


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_led_equals_bart_when_window_covers_input(bart_dir, led_dir, led_data_bin, dtype):
    bart, task = load_model(bart_dir / "model.pt", led_data_bin, dtype)
    led, _ = load_model(led_dir / "model.pt", led_data_bin, dtype)
    assert isinstance(led, LEDModel) and isinstance(led.encoder, LEDEncoder)
    assert all(isinstance(layer.self_attn, LongformerSelfAttention) for layer in led.encoder.layers)
    assert led.encoder.max_source_positions == LED_POSITIONS
    d = task.source_dictionary
    src, lengths = source_batch(d, [SOURCE_POSITIONS, 25, 9])  # full, and left-padded rows
    prev = prev_output(d, 3, 7)
    with torch.no_grad():
        expected = bart(src, lengths, prev)[0]
        default_global = led(src, lengths, prev)[0]  # the first source token of each row is global
        no_global = led(src, lengths, prev, global_attention_mask=torch.zeros_like(src))[0]
    tolerance = 1e-5
    for got in (default_global, no_global):
        assert got.shape == expected.shape
        assert (got - expected).abs().max().item() <= tolerance


def test_forward_backward_at_four_times_bart_positions(bart_dir, led_dir, led_data_bin):
    bart, task = load_model(bart_dir / "model.pt", led_data_bin, torch.float32)
    led, _ = load_model(led_dir / "model.pt", led_data_bin, torch.float32, attention_window="8")
    d = task.source_dictionary
    src, lengths = source_batch(d, [LED_POSITIONS, LED_POSITIONS - 40])
    prev = prev_output(d, 2, 9)
    with pytest.raises(Exception):  # BART's position table stops at 32 (IndexError)
        bart(src, lengths, prev)
    led.train()
    logits = led(src, lengths, prev)[0]
    loss = torch.log_softmax(logits, dim=-1)[..., 5].mean()
    loss.backward()
    assert torch.isfinite(loss)
    positions = led.encoder.embed_positions.weight.grad
    reserved = d.pad() + 1
    # every position of the longest row got a gradient, past BART's last one too
    assert positions[reserved:reserved + LED_POSITIONS].abs().sum(dim=1).gt(0).all()
    # the default global token (first source token) trains the global projections
    for layer in led.encoder.layers:
        for name in ("q_global_proj", "k_global_proj", "v_global_proj"):
            grad = getattr(layer.self_attn, name).weight.grad
            assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_first_token_global_with_left_and_right_padding():
    pad = 1
    src = torch.tensor([[1, 1, 7, 8, 2], [7, 8, 9, 2, 1], [5, 6, 7, 8, 2]])
    expected = torch.zeros(3, 5, dtype=torch.bool)
    expected[0, 2] = expected[1, 0] = expected[2, 0] = True
    assert torch.equal(first_token_global(src, pad), expected)


def _encoder_out_through_forward(model, net_input):
    """The encoder's output (N, B, C) when the model runs ``model(**net_input)``, as fairseq's
    criteria call it in training."""
    seen = {}
    handle = model.encoder.register_forward_hook(lambda module, args, out: seen.setdefault("out", out))
    try:
        model(**net_input)
    finally:
        handle.remove()
    return seen["out"]["encoder_out"][0]


def test_global_mask_reaches_encoder(led_dir, led_data_bin):
    # window 2 and 2 layers: without global tokens, a token reaches at most 4 positions away
    led, task = load_model(led_dir / "model.pt", led_data_bin, attention_window="2")
    d = task.source_dictionary
    length, changed, reach = 40, 30, 2 * 2
    src, lengths = source_batch(d, [length, length])
    perturbed = src.clone()
    perturbed[:, changed] = d.index("the") if perturbed[0, changed] != d.index("the") else d.index("and")
    prev = prev_output(d, 2, 5)

    def encoder_delta(mask):
        outs = []
        for tokens in (src, perturbed):
            net_input = {"src_tokens": tokens, "src_lengths": lengths, "prev_output_tokens": prev}
            if mask is not None:
                net_input["global_attention_mask"] = mask
            with torch.no_grad():
                outs.append(_encoder_out_through_forward(led, net_input))
        return (outs[1] - outs[0]).abs().amax(dim=(1, 2))  # (N,) largest change per position

    far = torch.arange(length) < changed - reach  # beyond the changed token's reach
    unmarked = encoder_delta(torch.zeros_like(src))
    assert unmarked[far].max().item() == 0.0  # exactly untouched
    assert unmarked[changed].item() > 1e-3
    marked_mask = torch.zeros_like(src)
    marked_mask[:, changed] = 1
    marked = encoder_delta(marked_mask)
    assert marked[far].min().item() > 1e-6  # every position attends the global token
    # no mask in the batch: the first token is global (it sees the change, and passes it on)
    first = torch.zeros_like(src)
    first[:, 0] = 1
    default = encoder_delta(None)
    assert torch.equal(default, encoder_delta(first))
    assert default[0].item() > 1e-6 and unmarked[0].item() == 0.0


def test_generator_path_carries_the_global_mask(led_dir, led_data_bin):
    """fairseq's SequenceGenerator hands net_input (global mask included) to the encoder."""
    led, task = load_model(led_dir / "model.pt", led_data_bin, attention_window="2")
    d = task.source_dictionary
    src, lengths = source_batch(d, [30, 20])
    mask = torch.zeros_like(src)
    mask[:, 20] = 1
    with torch.no_grad():
        direct = led.encoder(src, src_lengths=lengths, global_attention_mask=mask)["encoder_out"][0]
        unmarked = led.encoder(src, src_lengths=lengths, global_attention_mask=torch.zeros_like(src))
        via_generator = led.encoder.forward_torchscript(
            {"src_tokens": src, "src_lengths": lengths, "global_attention_mask": mask})["encoder_out"][0]
    assert torch.equal(via_generator, direct)
    assert (direct - unmarked["encoder_out"][0]).abs().max() > 1e-6


def test_beam_search_equals_bart(bart_dir, led_dir, led_data_bin):
    bart, task = load_model(bart_dir / "model.pt", led_data_bin)
    led, _ = load_model(led_dir / "model.pt", led_data_bin)
    d = task.source_dictionary
    src, lengths = source_batch(d, [SOURCE_POSITIONS, 17, 11], seed=3)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    hypotheses = []
    for model in (bart, led):
        generator = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12)
        with torch.no_grad():
            hypotheses.append(generator.generate([model], sample))
    for want, got in zip(*hypotheses):
        assert len(got) == 3
        for a, b in zip(want, got):
            assert torch.equal(a["tokens"], b["tokens"])
            assert abs(a["score"].item() - b["score"].item()) < 1e-9


def test_long_source_refused_with_the_flags_that_help(led_dir, led_data_bin):
    led, task = load_model(led_dir / "model.pt", led_data_bin)
    src, lengths = source_batch(task.source_dictionary, [LED_POSITIONS + 1])
    with pytest.raises(ValueError, match="longer than the LED encoder's 128 positions.*--truncate-source"):
        led.encoder(src, src_lengths=lengths)


def test_position_count_mismatch_names_the_flag(led_dir, led_data_bin):
    with pytest.raises(ValueError, match="128 positions, this model 64: pass --max-source-positions 128"):
        load_model(led_dir / "model.pt", led_data_bin, max_source_positions=64)


def test_classification_heads_refused(led_dir, led_data_bin):
    led, task = load_model(led_dir / "model.pt", led_data_bin)
    src, lengths = source_batch(task.source_dictionary, [10])
    with pytest.raises(NotImplementedError, match="no classification heads"):
        led(src, lengths, prev_output(task.source_dictionary, 1, 3), classification_head_name="x")
