"""longformer-convert-bart (conversion/fairseq_sources.py, spec BART): what the LED checkpoint holds, and bad input.

The source is a stock fairseq BART (``fairseq-train --arch bart_base --task translation``, 3
updates; tests/support/led_models.py), in the Hydra-era layout (``cfg``); the older ``args`` layout of
the released bart.base / bart.large is made from it.
"""
import argparse
import copy

import pytest
import torch

from fairseq_longformer.cli import convert_bart as convert_cli
from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint
from fairseq_longformer.models.global_projections import GLOBAL_PROJECTIONS

from tests.support.led_models import LED_POSITIONS, SOURCE_POSITIONS, load
from tests.plugin.models.test_led import load_model, prev_output, source_batch

POS_KEY = "encoder.embed_positions.weight"
RESERVED = 2  # rows 0 .. padding_idx of fairseq's learned positions


def test_positions_tiled_globals_copied_decoder_untouched(bart_dir, led_dir):
    bart, led = load(bart_dir / "model.pt"), load(led_dir / "model.pt")
    source, target = bart["model"], led["model"]
    table = target[POS_KEY]
    assert table.shape == (LED_POSITIONS + RESERVED, source[POS_KEY].shape[1])
    assert torch.equal(table[:RESERVED], source[POS_KEY][:RESERVED])
    for tile in range(LED_POSITIONS // SOURCE_POSITIONS):
        start = RESERVED + tile * SOURCE_POSITIONS
        assert torch.equal(table[start:start + SOURCE_POSITIONS], source[POS_KEY][RESERVED:])
    for layer in range(2):
        for local, glob in GLOBAL_PROJECTIONS:
            for part in ("weight", "bias"):
                prefix = f"encoder.layers.{layer}.self_attn."
                assert torch.equal(target[f"{prefix}{glob}.{part}"], source[f"{prefix}{local}.{part}"])
    # every other tensor (the whole decoder, the embeddings) is the BART's own
    added = {k for k in target if "_global_proj." in k}
    assert set(target) - added == set(source)
    for key, value in source.items():
        if key != POS_KEY:
            assert torch.equal(target[key], value), key
    model = led["cfg"]["model"]
    assert (model.arch, model.attention_window, model.max_source_positions) == ("led_base", "32,32", LED_POSITIONS)
    assert model.max_target_positions == SOURCE_POSITIONS  # the decoder keeps BART's
    assert led["cfg"]["task"]["max_source_positions"] == LED_POSITIONS
    assert led["extra_state"]["led_conversion"]["bart_positions"] == SOURCE_POSITIONS
    assert led["last_optimizer_state"] is None  # fine-tuning starts fresh
    assert (led_dir / "dict.txt").read_bytes() == (bart_dir / "dict.txt").read_bytes()


def test_window_per_layer_is_recorded_and_built(bart_dir, led_data_bin, tmp_path):
    convert_bart_checkpoint(bart_dir, tmp_path / "led", max_positions=2 * SOURCE_POSITIONS, attention_window="4,8")
    assert load(tmp_path / "led" / "model.pt")["cfg"]["model"].attention_window == "4,8"
    led, _ = load_model(tmp_path / "led" / "model.pt", led_data_bin)
    assert [layer.self_attn.config.pattern.window for layer in led.encoder.layers] == [4, 8]


def test_older_args_layout_converts_to_the_same_model(bart_dir, led_data_bin, tmp_path):
    """The released BART checkpoints keep a flat argparse Namespace in ``args`` and no ``cfg``."""
    state = load(bart_dir / "model.pt")
    legacy = copy.deepcopy(state)
    # a legacy model's cfg.model is that flat Namespace already (every flag, the task's included)
    legacy["args"] = argparse.Namespace(**vars(state["cfg"]["model"]))
    assert legacy["args"].task == "translation" and legacy["args"].source_lang == "src"
    legacy["cfg"] = None
    folder = tmp_path / "bart_legacy"
    folder.mkdir()
    torch.save(legacy, folder / "model.pt")
    (folder / "dict.txt").write_bytes((bart_dir / "dict.txt").read_bytes())
    result = convert_bart_checkpoint(folder, tmp_path / "led", max_positions=LED_POSITIONS, attention_window="32")
    written = load(result.checkpoint)
    assert written["cfg"] is None and written["args"].arch == "led_base"
    assert written["args"].max_source_positions == LED_POSITIONS
    bart, task = load_model(bart_dir / "model.pt", led_data_bin)
    led, _ = load_model(result.checkpoint, led_data_bin)
    src, lengths = source_batch(task.source_dictionary, [20, 13])
    prev = prev_output(task.source_dictionary, 2, 4)
    with torch.no_grad():
        assert (led(src, lengths, prev)[0] - bart(src, lengths, prev)[0]).abs().max() <= 1e-5


def test_cli_prints_the_commands_that_use_the_result(bart_dir, tmp_path, capsys):
    out = tmp_path / "led"
    code = convert_cli.main(["--source", str(bart_dir), "--output", str(out),
                             "--max-positions", str(LED_POSITIONS), "--attention-window", "16"])
    printed = capsys.readouterr().out
    assert code == 0 and (out / "model.pt").is_file()
    assert "--max-source-positions 128" in printed and "--attention-window 16,16" in printed
    assert "fairseq-generate DATA --user-dir" in printed and "--restore-file" in printed


# ----------------------------------------------------------------------------------------------
# bad input: a clear error, and nothing written


def _bart_copy(bart_dir, tmp_path, edit=None, dict_text=None):
    """A BART folder whose checkpoint went through ``edit(state)``, or whose dict.txt is replaced."""
    folder = tmp_path / "bad_bart"
    folder.mkdir()
    state = load(bart_dir / "model.pt")
    if edit is not None:
        edit(state)
    torch.save(state, folder / "model.pt")
    (folder / "dict.txt").write_text(dict_text if dict_text is not None else (bart_dir / "dict.txt").read_text())
    return folder


def _drop(key):
    return lambda state: state["model"].pop(key)


def _as_roberta(state):
    state["model"] = {k.replace("encoder.", "encoder.sentence_encoder.", 1): v for k, v in state["model"].items()}


def _short_positions(state):
    state["model"][POS_KEY] = state["model"][POS_KEY][:, :8]


BAD_CHECKPOINTS = {
    "roberta": (_as_roberta, "RoBERTa .*longformer-convert-roberta"),
    "missing decoder key": (_drop("decoder.layers.1.encoder_attn.k_proj.weight"),
                            "missing keys decoder.layers.1.encoder_attn.k_proj.weight"),
    "sinusoidal positions": (_drop(POS_KEY), "missing keys encoder.embed_positions.weight"),
    "positions shape": (_short_positions, r"encoder.embed_positions.weight has shape \(34, 8\)"),
    "no config": (lambda s: s.update(cfg=None, args=None), "neither 'cfg' nor 'args'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoint_writes_nothing(bart_dir, tmp_path, case):
    edit, message = BAD_CHECKPOINTS[case]
    source = _bart_copy(bart_dir, tmp_path, edit)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        convert_bart_checkpoint(source, out, max_positions=LED_POSITIONS)
    assert not out.exists()


BAD_ARGUMENTS = {
    "not a multiple": (dict(max_positions=100), "--max-positions 100 is not a multiple of BART's 32"),
    "zero positions": (dict(max_positions=0), "--max-positions must be a positive int"),
    "window count": (dict(attention_window="4,4,4"), "gives 3 values for 2 layers"),
    "negative window": (dict(attention_window="-1"), "window"),
    "window not a number": (dict(attention_window="wide"), "--attention-window 'wide'"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_arguments_write_nothing(bart_dir, tmp_path, case):
    kwargs, message = BAD_ARGUMENTS[case]
    kwargs = {"max_positions": LED_POSITIONS, **kwargs}
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        convert_bart_checkpoint(bart_dir, out, **kwargs)
    assert not out.exists()


def test_missing_files_and_wrong_dictionary(bart_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        convert_bart_checkpoint(tmp_path / "nowhere", out)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoint 'model.pt'"):
        convert_bart_checkpoint(empty, out)
    (empty / "model.pt").write_bytes((bart_dir / "model.pt").read_bytes())
    with pytest.raises(FileNotFoundError, match="a fairseq BART folder holds dict.txt"):
        convert_bart_checkpoint(empty, out)
    (empty / "dict.txt").write_text("just 2\nwords 1\n")
    with pytest.raises(ValueError, match="does not match the checkpoint: it gives 6 symbols"):
        convert_bart_checkpoint(empty, out, max_positions=LED_POSITIONS)
    (empty / "model.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="is not a fairseq BART checkpoint: torch.load failed"):
        convert_bart_checkpoint(empty, out, max_positions=LED_POSITIONS)
    assert not out.exists()


def test_existing_output_is_kept(bart_dir, led_dir, tmp_path, capsys):
    before = (led_dir / "model.pt").read_bytes()
    with pytest.raises(ValueError, match="already holds model.pt: pass --overwrite"):
        convert_bart_checkpoint(bart_dir, led_dir, max_positions=2 * SOURCE_POSITIONS)
    with pytest.raises(ValueError, match="is the source folder"):
        convert_bart_checkpoint(bart_dir, bart_dir, max_positions=LED_POSITIONS, overwrite=True)
    assert (led_dir / "model.pt").read_bytes() == before
    code = convert_cli.main(["--source", str(bart_dir), "--output", str(led_dir), "--max-positions", "64"])
    assert code == 2 and "longformer-convert-bart: error: " in capsys.readouterr().err
    assert (led_dir / "model.pt").read_bytes() == before


def test_failed_write_leaves_no_folder(bart_dir, tmp_path, monkeypatch):
    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="disk full"):
        convert_bart_checkpoint(bart_dir, out, max_positions=LED_POSITIONS)
    assert not out.exists()
