"""RoBERTa -> Longformer conversion (longformer-convert-roberta) and --train-new-positions-only.

The source is a real fairseq RoBERTa: stock ``fairseq-train --arch roberta_base --task masked_lm``
for a few updates on the KJV fixture (2 layers, 64 wide, 32 positions), built once per session.
"""
import argparse
import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_longformer  # noqa: F401  (registers the plugin)
from fairseq.models.roberta import RobertaModel
from fairseq_longformer.cli import convert_roberta as convert_cli
from fairseq_longformer.conversion.fairseq_sources import convert_roberta_checkpoint
from fairseq_longformer.models import freezing
from fairseq_longformer.models.longformer import LongformerModel

from tests.conftest import REPO

BIN = Path(sys.executable).parent
POSITIONS = 32  # the tiny RoBERTa's positions
TARGET = 4 * POSITIONS
RESERVED = 2  # rows 0 .. padding_idx of fairseq's learned positions
TINY = ["--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
        "--encoder-attention-heads", "4"]
POS_KEY = "encoder.sentence_encoder.embed_positions.weight"


def run(cmd, log: Path):
    env = dict(os.environ, OMP_NUM_THREADS="1")  # two threads per process thrash a shared 2-core box
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=REPO, timeout=240)
    log.write_text(result.stdout)
    # fairseq-train can die at interpreter exit after finishing ("terminate called without an
    # active exception", seen here); its checkpoint is saved by then
    finished = "done training in" in result.stdout
    assert result.returncode == 0 or finished, f"{' '.join(map(str, cmd))}\n{result.stdout[-3000:]}"
    return result.stdout


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.fixture(scope="session")
def roberta_dir(kjv_data_bin, tmp_path_factory) -> Path:
    """A stock fairseq RoBERTa folder (model.pt + dict.txt), trained for 3 updates."""
    work = tmp_path_factory.mktemp("roberta")
    run([str(BIN / "fairseq-train"), str(kjv_data_bin), "--arch", "roberta_base", "--task", "masked_lm",
         "--criterion", "masked_lm", *TINY, "--tokens-per-sample", str(POSITIONS),
         "--max-positions", str(POSITIONS), "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-3",
         "--lr-scheduler", "fixed", "--max-update", "3", "--cpu", "--num-workers", "0",
         "--disable-validation", "--no-epoch-checkpoints", "--save-dir", str(work / "save"),
         "--log-format", "simple"], work / "train.log")
    folder = work / "roberta"
    folder.mkdir()
    (folder / "model.pt").write_bytes((work / "save" / "checkpoint_last.pt").read_bytes())
    (folder / "dict.txt").write_bytes((kjv_data_bin / "dict.txt").read_bytes())
    return folder


@pytest.fixture(scope="session")
def converted_dir(roberta_dir, tmp_path_factory) -> Path:
    """Copy-initialised, 4x the positions, one-sided window 32 (covers any input of <= 32 tokens)."""
    out = tmp_path_factory.mktemp("converted") / "longformer"
    convert_roberta_checkpoint(roberta_dir, out, max_positions=TARGET, attention_window="32")
    return out


def hub(model_class, folder):
    # bpe=None: the KJV fixture is word-level; fairseq's default (gpt2) would download its vocabulary
    return model_class.from_pretrained(str(folder), checkpoint_file="model.pt", bpe=None).eval()


def tokens(batch, length, vocab, pad_rows=(), seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab - 1, (batch, length), generator=gen)  # no specials, no <mask>
    src[:, 0] = 0  # <s>
    for row, keep in pad_rows:
        src[row, keep:] = 1  # <pad>
    return src


# ---------------------------------------------------------------------------------------------
# the converted checkpoint


def test_positions_are_exact_tiles_and_globals_copies(roberta_dir, converted_dir):
    source = load(roberta_dir / "model.pt")["model"]
    source_cfg = load(roberta_dir / "model.pt")["cfg"]["model"]
    out = load(converted_dir / "model.pt")
    model = out["model"]
    src_pos, new_pos = source[POS_KEY], model[POS_KEY]
    assert new_pos.shape == (TARGET + RESERVED, 64)
    assert torch.equal(new_pos[:RESERVED], src_pos[:RESERVED])
    for tile in range(TARGET // POSITIONS):
        rows = slice(RESERVED + tile * POSITIONS, RESERVED + (tile + 1) * POSITIONS)
        assert torch.equal(new_pos[rows], src_pos[RESERVED:]), f"tile {tile}"
    for layer in range(2):
        for local, glob in (("q_proj", "q_global_proj"), ("k_proj", "k_global_proj"), ("v_proj", "v_global_proj")):
            for p in ("weight", "bias"):
                prefix = f"encoder.sentence_encoder.layers.{layer}.self_attn."
                assert torch.equal(model[prefix + f"{glob}.{p}"], source[prefix + f"{local}.{p}"])
    for key, value in source.items():  # every other tensor unchanged
        if key != POS_KEY:
            assert torch.equal(model[key], value), key
    assert set(model) - set(source) == {k for k in model if "_global_proj." in k}

    cfg = out["cfg"]["model"]
    assert (cfg._name, cfg.arch) == ("longformer_base", "longformer_base")
    assert cfg.attention_window == "32,32" and "roberta_positions" not in cfg  # read by nothing
    assert out["extra_state"]["longformer_conversion"]["roberta_positions"] == POSITIONS
    assert cfg.max_positions == TARGET and cfg.tokens_per_sample == TARGET
    assert cfg.attention_dropout == source_cfg.attention_dropout == 0.1  # RoBERTa's, as in the paper
    assert out["cfg"]["task"]["_name"] == "longformer_mlm" and out["cfg"]["task"]["tokens_per_sample"] == TARGET
    assert out["cfg"]["task"]["pad_to_multiple"] == 32  # gcd(block, windows): never pads past the positions
    assert out["optimizer_history"][-1]["num_updates"] == 0 and out["last_optimizer_state"] is None
    assert (converted_dir / "dict.txt").read_bytes() == (roberta_dir / "dict.txt").read_bytes()


def test_partial_tile_and_random_init(roberta_dir, tmp_path):
    src_pos = load(roberta_dir / "model.pt")["model"][POS_KEY]
    convert_roberta_checkpoint(roberta_dir, tmp_path / "c80", max_positions=80, attention_window="8")
    pos = load(tmp_path / "c80" / "model.pt")["model"][POS_KEY]
    assert pos.shape[0] == 80 + RESERVED
    assert torch.equal(pos[RESERVED + 64:], src_pos[RESERVED:RESERVED + 16])

    convert_roberta_checkpoint(roberta_dir, tmp_path / "rnd", max_positions=TARGET, init_positions="random")
    pos = load(tmp_path / "rnd" / "model.pt")["model"][POS_KEY]
    assert torch.equal(pos[:RESERVED], src_pos[:RESERVED])
    assert not torch.allclose(pos[RESERVED:RESERVED + POSITIONS], src_pos[RESERVED:])
    assert 0.015 < pos[RESERVED:].std().item() < 0.025  # BERT's N(0, 0.02)


def test_logits_equal_roberta_when_window_covers_input(roberta_dir, converted_dir):
    roberta, longformer = hub(RobertaModel, roberta_dir), hub(LongformerModel, converted_dir)
    assert isinstance(longformer.model, LongformerModel)
    vocab = len(roberta.task.source_dictionary)
    src = tokens(3, POSITIONS, vocab, pad_rows=[(1, 19)])
    with torch.no_grad():
        expected = roberta.model(src)[0]
        got = longformer.model(src)[0]
    real = src.ne(1)  # padding positions carry no meaning in RoBERTa's output
    assert got.shape == expected.shape
    err = (got - expected).abs()[real].max().item()
    assert err < 1e-5, err
    # not vacuous: the copy is what makes them equal; shifted positions change the logits
    with torch.no_grad():
        table = longformer.model.encoder.sentence_encoder.embed_positions.weight
        saved = table.clone()
        table[RESERVED:RESERVED + POSITIONS] = saved[RESERVED + 1:RESERVED + POSITIONS + 1]
        shifted = longformer.model(src)[0]
        table.copy_(saved)
    assert (shifted - expected).abs()[real].max().item() > 1e-3


def test_forward_backward_at_four_times_the_length(converted_dir):
    longformer = hub(LongformerModel, converted_dir)
    model = longformer.model.train()
    vocab = len(longformer.task.source_dictionary)
    src = tokens(2, TARGET, vocab, pad_rows=[(1, 100)])
    is_global = torch.zeros_like(src)
    is_global[:, 0] = 1  # <s> global: the global projections get a gradient too
    logits = model(src, global_attention_mask=is_global)[0]
    assert logits.shape == (2, TARGET, vocab)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), src.reshape(-1), ignore_index=1)
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    pos_grad = grads[POS_KEY]
    assert pos_grad[RESERVED + 3 * POSITIONS:].abs().sum() > 0  # positions past RoBERTa's are used
    assert grads["encoder.sentence_encoder.layers.0.self_attn.q_global_proj.weight"].abs().sum() > 0


def test_old_key_layout_and_args_convert_identically(roberta_dir, converted_dir, tmp_path):
    state = load(roberta_dir / "model.pt")
    old = {}
    for key, value in state["model"].items():
        key = "decoder." + key[len("encoder."):]
        old[key.replace(".layernorm_embedding.", ".emb_layer_norm.")] = value
    assert any(".emb_layer_norm." in k for k in old) and not any(k.startswith("encoder.") for k in old)
    # 2019 checkpoints: decoder.* names, a fused in_proj for layer 0, args (a Namespace), no cfg
    fused = "decoder.sentence_encoder.layers.0.self_attn."
    for p in ("weight", "bias"):
        old[fused + f"in_proj_{p}"] = torch.cat([old.pop(fused + f"{n}_proj.{p}") for n in "qkv"])
    legacy = {"args": copy.deepcopy(state["cfg"]["model"]), "model": old,
              "optimizer_history": state["optimizer_history"], "extra_state": state["extra_state"],
              "last_optimizer_state": None}
    folder = tmp_path / "old"
    folder.mkdir()
    torch.save(legacy, folder / "model.pt")
    (folder / "dict.txt").write_bytes((roberta_dir / "dict.txt").read_bytes())

    result = convert_roberta_checkpoint(folder, tmp_path / "out", max_positions=TARGET, attention_window="32")
    assert result.source_layout == "old"
    converted = load(tmp_path / "out" / "model.pt")
    reference = load(converted_dir / "model.pt")["model"]
    assert converted["cfg"] is None and converted["args"].arch == "longformer_base"
    assert set(converted["model"]) == set(reference)
    for key, value in reference.items():
        assert torch.equal(converted["model"][key], value), key

    a, b = hub(LongformerModel, tmp_path / "out"), hub(LongformerModel, converted_dir)
    src = tokens(2, POSITIONS, len(b.task.source_dictionary))
    with torch.no_grad():
        assert torch.equal(a.model(src)[0], b.model(src)[0])


# ---------------------------------------------------------------------------------------------
# --train-new-positions-only


def test_train_new_positions_only_changes_only_new_rows(kjv_data_bin, converted_dir, tmp_path):
    """One fairseq-train update from the converted checkpoint (--restore-file): every weight but the
    new position rows must come back bit-identical, and every new row must have moved."""
    save = tmp_path / "save"
    run([str(BIN / "fairseq-train"), str(kjv_data_bin), "--user-dir", str(REPO / "fairseq_longformer"),
         "--arch", "longformer_base", "--task", "longformer_mlm", "--criterion", "longformer_mlm", *TINY,
         "--attention-window", "32", "--pad-to-multiple", "32", "--tokens-per-sample", str(TARGET),
         "--max-positions", str(TARGET), "--sample-break-mode", "none", "--batch-size", "4",
         "--optimizer", "adam", "--lr", "1e-2", "--lr-scheduler", "fixed", "--weight-decay", "0",
         "--max-update", "1", "--cpu", "--num-workers", "0", "--disable-validation",
         "--no-epoch-checkpoints", "--save-dir", str(save), "--log-format", "simple",
         "--restore-file", str(converted_dir / "model.pt"), "--reset-optimizer", "--reset-dataloader",
         "--reset-meters", "--train-new-positions-only", str(POSITIONS)], tmp_path / "train.log")
    before = load(converted_dir / "model.pt")["model"]
    after = load(save / "checkpoint_last.pt")["model"]
    assert set(before) == set(after)
    for key, value in before.items():
        if key != POS_KEY:
            assert torch.equal(after[key], value), f"{key} changed"
    frozen = RESERVED + POSITIONS
    assert torch.equal(after[POS_KEY][:frozen], before[POS_KEY][:frozen])
    moved = (after[POS_KEY][frozen:] - before[POS_KEY][frozen:]).abs().amax(dim=1)
    assert bool((moved > 0).all()), f"{int((moved == 0).sum())} new rows did not move"


def test_freezing_refuses_weight_decay_and_useless_counts(converted_dir):
    model = hub(LongformerModel, converted_dir).model
    with pytest.raises(ValueError, match="weight-decay 0.01"):
        freezing.apply_from_args(model, argparse.Namespace(train_new_positions_only=POSITIONS, weight_decay=0.01))
    with pytest.raises(ValueError, match="no position is new"):
        freezing.freeze_all_but_new_positions(model, TARGET)
    unchanged = freezing.apply_from_args(model, argparse.Namespace(weight_decay=0.01))  # flag off: no-op
    assert all(p.requires_grad for p in unchanged.parameters())


def test_freezing_hook_in_process(converted_dir):
    model = hub(LongformerModel, converted_dir).model.train()
    trainable = freezing.freeze_all_but_new_positions(model, POSITIONS)
    assert trainable == TARGET - POSITIONS
    assert [n for n, p in model.named_parameters() if p.requires_grad] == [POS_KEY]
    src = tokens(2, TARGET, 1001)
    model(src)[0].sum().backward()
    grad = model.encoder.sentence_encoder.embed_positions.weight.grad
    assert grad[:RESERVED + POSITIONS].abs().sum() == 0
    assert (grad[RESERVED + POSITIONS:].abs().sum(dim=1) > 0).all()


# ---------------------------------------------------------------------------------------------
# bad input: a clear error, nothing written


def _assert_nothing_written(out: Path):
    assert not out.exists(), sorted(p.name for p in out.iterdir())


def _copy_roberta(roberta_dir, folder: Path, state=None, dict_text=None) -> Path:
    folder.mkdir()
    if state is None:
        (folder / "model.pt").write_bytes((roberta_dir / "model.pt").read_bytes())
    else:
        torch.save(state, folder / "model.pt")
    (folder / "dict.txt").write_text(dict_text if dict_text is not None else (roberta_dir / "dict.txt").read_text())
    return folder


def test_not_a_checkpoint(roberta_dir, tmp_path):
    folder = tmp_path / "junk"
    folder.mkdir()
    (folder / "model.pt").write_bytes(b"this is not a checkpoint" * 10)
    (folder / "dict.txt").write_text((roberta_dir / "dict.txt").read_text())
    with pytest.raises(ValueError, match="not a fairseq RoBERTa checkpoint"):
        convert_roberta_checkpoint(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")

    torch.save({"weights": torch.zeros(3)}, folder / "model.pt")
    with pytest.raises(ValueError, match="expected a dict with a 'model' state dict"):
        convert_roberta_checkpoint(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_missing_keys_are_named(roberta_dir, tmp_path):
    state = load(roberta_dir / "model.pt")
    del state["model"]["encoder.lm_head.dense.weight"]
    del state["model"]["encoder.sentence_encoder.layers.1.fc1.weight"]
    folder = _copy_roberta(roberta_dir, tmp_path / "src", state=state)
    with pytest.raises(ValueError) as info:
        convert_roberta_checkpoint(folder, tmp_path / "out")
    message = str(info.value)
    assert "not a RoBERTa checkpoint" in message
    assert "encoder.lm_head.dense.weight" in message and "layers.1.fc1.weight" in message
    _assert_nothing_written(tmp_path / "out")

    # a translation-style model (no sentence encoder at all): every embedding key is named
    folder = _copy_roberta(roberta_dir, tmp_path / "src2", state={**state, "model": {"encoder.embed_tokens.weight": torch.zeros(4, 4)}})
    with pytest.raises(ValueError, match=r"missing keys encoder\.sentence_encoder\.embed_tokens\.weight"):
        convert_roberta_checkpoint(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_dictionary_size_must_match(roberta_dir, tmp_path):
    lines = (roberta_dir / "dict.txt").read_text().splitlines(True)
    folder = _copy_roberta(roberta_dir, tmp_path / "src", dict_text="".join(lines[:-1]))
    # 995 lines + 4 specials + <mask> = 1000 expected; the embeddings have 1001 rows
    with pytest.raises(ValueError, match=r"4 specials \+ 995 lines\) plus <mask> .* = 1000 rows expected.* has 1001"):
        convert_roberta_checkpoint(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_target_shorter_than_source(roberta_dir, tmp_path):
    with pytest.raises(ValueError, match=f"--max-positions 16 is smaller than the source model's {POSITIONS}"):
        convert_roberta_checkpoint(roberta_dir, tmp_path / "out", max_positions=16)
    _assert_nothing_written(tmp_path / "out")


def test_cli_reports_errors_and_refuses_to_overwrite(roberta_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert convert_cli.main(["--source", str(roberta_dir), "--output", str(out), "--max-positions", "8"]) == 2
    assert "smaller than the source model's" in capsys.readouterr().err
    _assert_nothing_written(out)

    assert convert_cli.main(["--source", str(roberta_dir), "--output", str(out), "--max-positions", "64",
                             "--attention-window", "4,8"]) == 0
    printed = capsys.readouterr().out
    assert "--train-new-positions-only 32" in printed and "--attention-window 4,8" in printed
    # a command that works from any folder (--user-dir fairseq_longformer only from the repo root)
    assert "longformer-train DATA " in printed and "--user-dir" not in printed
    assert "--pad-to-multiple 4" in printed  # gcd(64, 4, 8)
    first = (out / "model.pt").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == [".written-by-fairseq-longformer", "dict.txt", "model.pt"]  # no temp files
    assert convert_cli.main(["--source", str(roberta_dir), "--output", str(out), "--max-positions", "128"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "model.pt").read_bytes() == first
    assert convert_cli.main(["--source", str(roberta_dir), "--output", str(roberta_dir), "--overwrite"]) == 2
    assert "is the source folder" in capsys.readouterr().err
