"""LED -> Hugging Face LEDForConditionalGeneration (conversion/hf_export.py and families/led.py, longformer-export-hf).

The LED is the session's tiny BART converted with per-layer windows 4 and 8 (HF: 8 and 16), so
the 40-token inputs here cover several windows and HF pads them internally to 48.
"""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_longformer.cli import export_hf as export_cli
from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint
from fairseq_longformer.conversion.hf_export import export_led, export_led_model, load_led

from tests.support.led_models import LED_POSITIONS, SOURCE_POSITIONS, load

transformers = pytest.importorskip("transformers")

LENGTH = 40


@pytest.fixture(scope="module")
def led_windows_dir(bart_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("led_hf") / "led"
    convert_bart_checkpoint(bart_dir, out, max_positions=LED_POSITIONS, attention_window="4,8")
    return out


def right_padded_batch(dictionary, lengths, seed=0):
    """(B, LENGTH) tokens padded on the RIGHT (HF's convention), rows ending in </s>, and a
    global mask with the first token of each row (fairseq's default) plus token 17 of row 0."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), LENGTH), dictionary.pad(), dtype=torch.long)
    for row, n in enumerate(lengths):
        src[row, :n] = torch.randint(dictionary.nspecial, len(dictionary), (n,), generator=g)
        src[row, n - 1] = dictionary.eos()
    mask = torch.zeros_like(src)
    mask[:, 0] = 1
    mask[0, 17] = 1
    return src, mask


def hf_forward_inputs(src, mask, pad):
    return dict(input_ids=src, attention_mask=src.ne(pad).long(), global_attention_mask=mask)


def test_export_logits_match_fairseq(led_windows_dir, tmp_path):
    out = tmp_path / "hf"
    result = export_led(led_windows_dir, out)
    config = result.config
    assert config["attention_window"] == [8, 16]  # two-sided
    assert (config["max_encoder_position_embeddings"], config["max_decoder_position_embeddings"]) == \
        (LED_POSITIONS, SOURCE_POSITIONS)
    assert config["decoder_start_token_id"] == 2 and (out / "fairseq_dict.txt").is_file()
    hf = transformers.LEDForConditionalGeneration.from_pretrained(str(out)).eval()
    fairseq_state = load(led_windows_dir / "model.pt")["model"]
    assert torch.equal(hf.led.encoder.embed_positions.weight, fairseq_state["encoder.embed_positions.weight"][2:])

    led, d = load_led(led_windows_dir)
    src, mask = right_padded_batch(d, [LENGTH, 25])
    lengths = src.ne(d.pad()).sum(dim=1)
    prev = torch.randint(d.nspecial, len(d), (2, 6), generator=torch.Generator().manual_seed(1))
    prev[:, 0] = d.eos()
    first_only = mask.clone()  # fairseq's default global token (the first), as HF needs it said
    first_only[0, 17] = 0
    real = src.ne(d.pad())
    with torch.no_grad():
        for fairseq_mask, hf_mask in ((mask, mask), (None, first_only)):
            want = led(src, lengths, prev, global_attention_mask=fairseq_mask)[0]
            encoder = led.encoder(src, src_lengths=lengths, global_attention_mask=fairseq_mask)
            got = hf(**hf_forward_inputs(src, hf_mask, d.pad()), decoder_input_ids=prev)
            assert (got.logits - want).abs().max().item() <= 1e-4
            hidden_want = encoder["encoder_out"][0].transpose(0, 1)[real]
            assert (got.encoder_last_hidden_state[real] - hidden_want).abs().max().item() <= 1e-4
        # the extra global token changes the encoder: the two masks were two different comparisons
        marked = led.encoder(src, src_lengths=lengths, global_attention_mask=mask)["encoder_out"][0]
        assert (marked.transpose(0, 1)[real] - hidden_want).abs().max().item() > 1e-3


def test_greedy_generation_identical(led_windows_dir, tmp_path):
    """Beam 1, fp64, on a model with perturbed weights (so the outputs vary from step to step)."""
    led, d = load_led(led_windows_dir)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in led.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.5)
    export_led_model(led, d, tmp_path / "hf")
    hf = transformers.LEDForConditionalGeneration.from_pretrained(str(tmp_path / "hf")).eval().double()
    led = led.double()
    src, mask = right_padded_batch(d, [LENGTH, 25, 11], seed=2)
    assert len(same_greedy_output(led, hf, d, src, mask)) > 3  # not one token repeated: real choices


def same_greedy_output(led, hf, d, src, mask, steps=10):
    """Greedy decoding (beam 1) of right-padded ``src`` (B, N) by the fairseq LED and the HF one,
    asserted identical row by row; returns the set of tokens emitted."""
    generator = SequenceGenerator([led], d, beam_size=1, max_len_b=steps)
    net_input = {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(dim=1), "global_attention_mask": mask}
    with torch.no_grad():
        fairseq_out = generator.generate([led], {"net_input": net_input})
        # fairseq never emits <pad> and not </s> first; it forces </s> after max_len_b tokens
        hf_out = hf.generate(**hf_forward_inputs(src, mask, d.pad()), num_beams=1, do_sample=False,
                             max_new_tokens=steps, min_new_tokens=1, suppress_tokens=[d.pad()])
    distinct = set()
    for row in range(src.shape[0]):
        want = fairseq_out[row][0]["tokens"].tolist()[:steps]  # without the forced final </s>
        got = hf_out[row, 1:].tolist()  # without the decoder start token
        if d.eos() in got:
            got = got[:got.index(d.eos()) + 1]
        assert got == want, row
        distinct.update(want)
    return distinct


def test_export_cli_dispatches_an_led(led_windows_dir, tmp_path, capsys):
    assert export_cli.main([str(led_windows_dir), str(tmp_path / "hf")]) == 0
    assert "LEDForConditionalGeneration, attention_window [8, 16]" in capsys.readouterr().out
    assert export_cli.main([str(led_windows_dir), str(tmp_path / "hf2"), "--head-name", "x"]) == 2
    assert "an LED checkpoint has no task heads" in capsys.readouterr().err
    assert not (tmp_path / "hf2").exists()


def test_unrepresentable_led_is_refused_and_nothing_written(led_windows_dir, tmp_path):
    state = load(led_windows_dir / "model.pt")
    state["cfg"]["model"].attention_window = "0,8"
    state["cfg"]["model"].attention_dilation = "1,2"
    folder = tmp_path / "led"
    folder.mkdir()
    torch.save(state, folder / "model.pt")
    (folder / "dict.txt").write_bytes((led_windows_dir / "dict.txt").read_bytes())
    out = tmp_path / "hf"
    with pytest.raises(ValueError, match=r"encoder layer 0: window 0 .*encoder layer 1: dilation"):
        export_led(folder, out)
    assert not out.exists()
    with pytest.raises(FileNotFoundError, match="pass --dict"):
        export_led(folder / "model.pt", out, dict_path=tmp_path / "missing.txt")


def test_windows_transformers_cannot_run_are_refused_at_export(bart_dir, tmp_path, capsys):
    """Per-layer windows 64 and 96 (HF 128 and 192): HF's LED pads every input to a multiple of the
    largest window and asserts each layer's divides it, so such a folder fails on its first forward.
    The export refuses it with one line, writes nothing and leaves its inputs as they were."""
    from fairseq_longformer.cli import convert_bart as convert_cli

    led = tmp_path / "led"
    assert convert_cli.main(["--source", str(bart_dir), "--output", str(led), "--max-positions",
                             str(LED_POSITIONS), "--attention-window", "64,96"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in led.iterdir()}
    out = tmp_path / "hf"
    assert export_cli.main([str(led), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("longformer-export-hf: error:") and err.count("\n") == 0, err
    assert "--attention-window 64,96" in err and "divide the largest" in err and "Traceback" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["led"]
    assert {p.name: p.read_bytes() for p in led.iterdir()} == before
