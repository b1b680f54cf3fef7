"""Hugging Face LEDForConditionalGeneration -> fairseq LED (``import_led``, ``longformer-import-hf``).

fairseq -> HF -> fairseq gives back every tensor bit for bit and the same model settings; an LED
made in HF (random, perturbed weights, no fairseq files in its folder) imports to a fairseq LED
whose logits are HF's (fp64) and whose greedy output is HF's.
"""
import json

import pytest
import torch

from fairseq_longformer.cli import import_hf as import_cli
from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint
from fairseq_longformer.conversion.families.led import RESERVED_ROWS
from fairseq_longformer.conversion.hf_export import export_led, load_led
from fairseq_longformer.conversion.hf_import import import_led

from tests.support.led_models import LED_POSITIONS, load
from tests.plugin.conversion.test_hf_led import LENGTH, hf_forward_inputs, right_padded_batch, same_greedy_output

transformers = pytest.importorskip("transformers")

# the settings that define the network fairseq builds (the rest are training flags)
MODEL_SETTINGS = ("arch", "encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim",
                  "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "encoder_attention_heads",
                  "decoder_attention_heads", "attention_window", "attention_dilation", "max_source_positions",
                  "max_target_positions", "dropout", "attention_dropout", "activation_dropout", "activation_fn",
                  "share_all_embeddings", "share_decoder_input_output_embed", "layernorm_embedding",
                  "no_scale_embedding", "encoder_normalize_before", "decoder_normalize_before",
                  "encoder_learned_pos", "decoder_learned_pos")


@pytest.fixture(scope="module")
def exported(bart_dir, tmp_path_factory):
    """(fairseq LED folder with windows 4 and 8, its HF export)."""
    work = tmp_path_factory.mktemp("led_import")
    convert_bart_checkpoint(bart_dir, work / "led", max_positions=LED_POSITIONS, attention_window="4,8")
    export_led(work / "led", work / "hf")
    return work / "led", work / "hf"


def setting(cfg_model, name):
    return getattr(cfg_model, name) if not isinstance(cfg_model, dict) else cfg_model[name]


def test_round_trip_is_bit_exact(exported, tmp_path):
    led_folder, hf_folder = exported
    assert (hf_folder / RESERVED_ROWS).is_file()
    result = import_led(hf_folder, tmp_path / "back")
    assert result.dictionary_source == "fairseq_dict.txt" and not result.warnings
    assert result.attention_window == (4, 8) and result.max_positions == LED_POSITIONS

    original, imported = load(led_folder / "model.pt"), load(tmp_path / "back" / "model.pt")
    assert set(original["model"]) == set(imported["model"])
    different = [k for k, v in original["model"].items() if not torch.equal(v, imported["model"][k])
                 or v.dtype != imported["model"][k].dtype]
    assert different == []
    for name in MODEL_SETTINGS:
        assert setting(imported["cfg"]["model"], name) == setting(original["cfg"]["model"], name), name

    # both load through fairseq the same way, with the same dictionary
    (led, d_led), (back, d_back) = load_led(led_folder), load_led(tmp_path / "back")
    assert d_led.symbols == d_back.symbols
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in led.state_dict().items())


def test_cli_dispatches_an_led_folder_and_fairseq_loads_the_result(exported, led_data_bin, tmp_path, capsys):
    """longformer-import-hf on an LED folder; the checkpoint loads as fairseq-generate loads one."""
    from fairseq import checkpoint_utils

    _, hf_folder = exported
    assert import_cli.main([str(hf_folder), str(tmp_path / "back")]) == 0
    out = capsys.readouterr().out
    assert "(LED, dictionary: fairseq_dict.txt)" in out and "--arch led_base" in out
    assert "--attention-window 4,8" in out and f"--max-source-positions {LED_POSITIONS}" in out
    models, cfg, _ = checkpoint_utils.load_model_ensemble_and_task(
        [str(tmp_path / "back" / "model.pt")],
        arg_overrides={"data": str(led_data_bin), "source_lang": "src", "target_lang": "tgt"})
    assert type(models[0]).__name__ == "LEDModel" and cfg.task._name == "translation"
    assert cfg.task.max_source_positions == LED_POSITIONS


def hf_made_led(folder, seed=1):
    """An LED created and saved by transformers itself (no fairseq files), weights perturbed so
    that outputs vary from token to token (seed 1: greedy picks 5 different tokens; others repeat one)."""
    config = transformers.LEDConfig(
        vocab_size=61, d_model=32, encoder_layers=2, decoder_layers=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        encoder_attention_heads=4, decoder_attention_heads=4, max_encoder_position_embeddings=LED_POSITIONS,
        max_decoder_position_embeddings=32, attention_window=[8, 16], dropout=0.1, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(seed)
    model = transformers.LEDForConditionalGeneration(config).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(torch.randn(p.shape, generator=g) * (2.0 if "embed_positions" in name else 0.5))
    model.save_pretrained(str(folder))
    return model


def test_hf_made_led_logits_and_greedy_output(tmp_path):
    hf = hf_made_led(tmp_path / "hf").double()
    result = import_led(tmp_path / "hf", tmp_path / "fs")
    assert result.dictionary_source == "placeholders" and any(RESERVED_ROWS in w for w in result.warnings)
    assert result.attention_window == (4, 8)
    led, d = load_led(tmp_path / "fs")
    assert len(d) == 61
    led = led.double()
    src, mask = right_padded_batch(d, [LENGTH, 25, 11], seed=3)
    lengths = src.ne(d.pad()).sum(dim=1)
    prev = torch.randint(d.nspecial, len(d), (3, 6), generator=torch.Generator().manual_seed(4))
    prev[:, 0] = d.eos()
    with torch.no_grad():
        want = hf(**hf_forward_inputs(src, mask, d.pad()), decoder_input_ids=prev).logits
        got = led(src, lengths, prev, global_attention_mask=mask)[0]
    assert (got - want).abs().max().item() <= 1e-4

    assert len(same_greedy_output(led, hf, d, src, mask)) > 3  # real choices, not one token repeated


def test_wrong_or_damaged_folders_are_refused_and_nothing_written(exported, tmp_path, capsys):
    _, hf_folder = exported
    out = tmp_path / "out"

    def refused(folder, match, error=ValueError):
        with pytest.raises(error, match=match):
            import_led(folder, out)
        assert not out.exists()
        assert import_cli.main([str(folder), str(out)]) == 2
        assert "longformer-import-hf: error:" in capsys.readouterr().err
        assert not out.exists()

    refused(tmp_path / "absent", "is not a folder", FileNotFoundError)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("config.json", "model.safetensors", "fairseq_dict.txt"):
        (damaged / name).write_bytes((hf_folder / name).read_bytes())
    weights = (hf_folder / "model.safetensors").read_bytes()
    (damaged / "model.safetensors").write_bytes(weights[:len(weights) // 2])  # a copy cut short
    refused(damaged, "do not load")
    (damaged / "model.safetensors").write_bytes(weights)
    (damaged / "config.json").write_text('{"model_type": "led", ')
    refused(damaged, "is not valid JSON")

    config = json.loads((hf_folder / "config.json").read_text())
    for change, match in (({"activation_function": "relu"}, "activation_function = 'relu'"),
                          ({"attention_window": [8, 5]}, r"attention_window = \[8, 5\]"),
                          ({"decoder_start_token_id": 0}, "decoder_start_token_id = 0"),
                          ({"decoder_layers": 3}, "missing .*led.decoder.layers.2")):
        (damaged / "config.json").write_text(json.dumps({**config, **change}))
        refused(damaged, match)
    (damaged / "config.json").write_text(json.dumps({**config, "model_type": "longformer"}))
    with pytest.raises(ValueError, match="not 'led'"):
        import_led(damaged, out)

    assert import_cli.main([str(hf_folder), str(out), "--max-positions", "256"]) == 2
    assert "an LED folder keeps its positions" in capsys.readouterr().err
    assert not out.exists()
