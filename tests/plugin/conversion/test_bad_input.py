"""Files from others are data: longformer-export-hf and longformer-import-hf on damaged or hostile
inputs end with exit 2 and one line naming the file and the fix, no traceback, nothing written and
the inputs untouched (a snapshot of the folder before and after)."""
import json
import sys
import time
from pathlib import Path

import pytest
import torch

import fairseq_longformer  # noqa: F401  (registers the plugin)
from fairseq_longformer.cli import export_hf as export_cli
from fairseq_longformer.cli import import_hf as import_cli

transformers = pytest.importorskip("transformers")


def snapshot(folder: Path):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(cli, args, inputs: Path, out: Path, capsys, *names):
    """Run ``cli.main(args)``; assert exit 2, one ``error:`` line naming ``names``, no traceback,
    ``out`` not created and ``inputs`` unchanged."""
    before = snapshot(inputs)
    assert cli.main([str(a) for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "error: " in err and "Traceback" not in err
    for name in names:
        assert name in err, err
    assert not out.exists()
    assert snapshot(inputs) == before
    return err


@pytest.mark.parametrize("content, why", [
    (b"", "empty"),
    (b"model weights were here\n", "torch.load failed"),
    (None, "found list"),  # a torch file, but no fairseq checkpoint
], ids=["empty", "text", "not-a-dict"])
def test_export_refuses_what_is_not_a_checkpoint(tmp_path, capsys, content, why):
    inputs = tmp_path / "in"
    inputs.mkdir()
    checkpoint = inputs / "model.pt"
    if content is None:
        torch.save([1, 2, 3], checkpoint)
    else:
        checkpoint.write_bytes(content)
    (inputs / "dict.txt").write_text("a 1\n")
    refused(export_cli, [checkpoint, tmp_path / "hf"], inputs, tmp_path / "hf", capsys, str(checkpoint), why)


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> Path:
    """A tiny HF Longformer masked LM (2 layers, 32 wide), as transformers writes it."""
    config = transformers.LongformerConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=66, type_vocab_size=1, layer_norm_eps=1e-5, attention_window=[4, 8],
        pad_token_id=1, bos_token_id=0, eos_token_id=2, sep_token_id=2)
    folder = tmp_path_factory.mktemp("hf") / "longformer"
    transformers.LongformerForMaskedLM(config).save_pretrained(folder)
    return folder


def copy_folder(source: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for path in source.iterdir():
        (dest / path.name).write_bytes(path.read_bytes())
    return dest


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))


def test_huge_layer_count_is_one_error_before_anything_is_sized(hf_folder, tmp_path, capsys):
    folder = copy_folder(hf_folder, tmp_path / "in")
    edit_config(folder, num_hidden_layers=3e7)  # a float in JSON, as a hand-edited config may hold
    start = time.perf_counter()
    err = refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys,
                  "config.json", "num_hidden_layers = 30000000 but the tensors hold 2 layers")
    assert time.perf_counter() - start < 10, "the config was trusted before its sizes were checked"
    assert "download the folder again" in err


@pytest.mark.parametrize("changes, names", [
    (dict(num_hidden_layers=None), ["lacks num_hidden_layers"]),
    (dict(vocab_size=10 ** 9), ["vocab_size = 1000000000 but", "word_embeddings"]),
    (dict(hidden_size="32"), ["hidden_size = '32' is not a whole number"]),
], ids=["layers-missing", "vocab-huge", "width-text"])
def test_config_sizes_are_checked_against_the_tensors(hf_folder, tmp_path, capsys, changes, names):
    folder = copy_folder(hf_folder, tmp_path / "in")
    edit_config(folder, **changes)
    refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys, "config.json", *names)


def test_shard_outside_the_folder_is_refused(hf_folder, tmp_path, capsys):
    folder = copy_folder(hf_folder, tmp_path / "in")
    weights = folder / "model.safetensors"
    (folder / "shard-1.safetensors").write_bytes(weights.read_bytes())
    weights.unlink()
    secret = tmp_path / "secret.safetensors"  # a real tensor file, so only the path can refuse it
    secret.write_bytes((folder / "shard-1.safetensors").read_bytes())
    index = {"metadata": {}, "weight_map": {"a": "shard-1.safetensors", "b": "../secret.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys,
            "model.safetensors.index.json", "'../secret.safetensors'", "outside the folder")
    index["weight_map"]["b"] = "../../etc/passwd"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys, "'../../etc/passwd'")


def test_tokenizer_json_without_content_is_refused(hf_folder, tmp_path, capsys):
    folder = copy_folder(hf_folder, tmp_path / "in")
    (folder / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 0, "special": True}]}))
    refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys,
            "tokenizer.json", "'content'", "download the folder again")


def test_a_config_without_layer_norm_eps_is_read_as_transformers_reads_it(hf_folder, tmp_path, capsys):
    """transformers builds a config.json without layer_norm_eps with its own default (1e-12), not
    fairseq's 1e-5: importing it as 1e-5 gave a model whose logits drift from the one transformers
    runs. The importer reads the folder as transformers does, and so names the mismatch."""
    folder = copy_folder(hf_folder, tmp_path / "in")
    edit_config(folder, layer_norm_eps=None)
    read_by_transformers = transformers.AutoConfig.from_pretrained(folder).layer_norm_eps
    assert read_by_transformers != 1e-5
    refused(import_cli, [folder, tmp_path / "out"], folder, tmp_path / "out", capsys,
            f"layer_norm_eps = {read_by_transformers!r}", "config.json has no layer_norm_eps",
            '"layer_norm_eps": 1e-05')


def test_import_without_transformers_names_the_extra(hf_folder, tmp_path, capsys, monkeypatch):
    """Without transformers (``sys.modules[...] = None`` makes its import fail as if absent) the import
    is one line naming the extra to install, exit 2, and no output folder."""
    monkeypatch.setitem(sys.modules, "transformers", None)
    err = refused(import_cli, [hf_folder, tmp_path / "out"], hf_folder, tmp_path / "out", capsys,
                  "pip install 'fairseq-longformer[hf]'")
    assert "longformer-import-hf" in err
