"""``fairseq-train --task longformer_coref`` end to end from a converted RoBERTa checkpoint (the tiny
stock-fairseq RoBERTa of tests/plugin/conversion/test_roberta.py, converted to 128 positions).

Runs (fairseq-train's own ``cli_main``, in this process to save the imports):
  1. whole documents (one encoder pass each), fp32, --write-conll: the loss falls (two epochs of
     the same 8 documents: the second's summed loss is below the first's), MUC, B³, CEAF-e
     and the CoNLL F1 are logged, and the written response scored against the written key by
     ``longformer-coref-score`` gives the logged numbers; the saved optimizer holds two parameter
     groups whose rates differ by --head-lr-multiplier; longformer-export-hf refuses the head in
     one line and exports the encoder with --encoder-only;
  2. the same run resumed for one more update: it continues from update 8;
  3. segments of 32 subwords (the converted RoBERTa's own length), --bf16: finite, falling loss,
     metrics logged.
The documents are KJV verses with inserted entities (experiments/coref_small), about 70 words.
"""
import json
import logging
import re
import sys

import pytest
import torch

from fairseq_longformer.cli import export_hf
from longformer_preprocessing.tasks import coref_score

from tests.plugin.conversion.test_roberta import converted_dir, roberta_dir  # noqa: F401  (fixtures)
from tests.support.coref_data import prepare_word_level, write_conll
from tests.support.training import train_inner

TINY = ["--arch", "longformer_base", "--encoder-layers", "2", "--encoder-embed-dim", "64",
        "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4", "--attention-window", "32",
        "--max-positions", "128", "--pad-to-multiple", "32", "--task", "longformer_coref",
        "--criterion", "longformer_coref", "--coref-ffnn-size", "32", "--coref-max-span-width", "6",
        "--coref-max-antecedents", "8", "--coref-dropout", "0"]
TRAIN = ["--optimizer", "adam", "--lr", "2e-4", "--head-lr-multiplier", "10", "--lr-scheduler", "polynomial_decay",
         "--warmup-updates", "1", "--total-num-update", "8", "--batch-size", "2", "--dropout", "0", "--seed", "2",
         "--cpu", "--num-workers", "0", "--log-format", "simple", "--log-interval", "1", "--no-epoch-checkpoints",
         "--validate-interval-updates", "100"]


@pytest.fixture(scope="module")
def coref_data(converted_dir, tmp_path_factory):  # noqa: F811
    work = tmp_path_factory.mktemp("coref")
    conll = write_conll(work / "conll", 8, 2, distances=(3, 12))
    stats = prepare_word_level(conll, converted_dir / "dict.txt", work / "data")
    assert stats["splits"]["train"]["tokens"]["max"] <= 128  # whole documents fit the 128 positions
    return work / "data"


def train(argv, caplog) -> str:
    """fairseq-train's cli_main on argv, in this process; its log lines."""
    from fairseq_cli import train as fairseq_train

    caplog.clear()
    old = sys.argv
    sys.argv = ["fairseq-train", *map(str, argv)]
    try:
        with caplog.at_level(logging.INFO):
            fairseq_train.cli_main()
    finally:
        sys.argv = old
    return "\n".join(f"{r.name} | {r.getMessage()}" for r in caplog.records)


def valid_line(text: str) -> dict:
    lines = [line for line in text.splitlines() if "valid on 'valid' subset" in line]
    assert lines, text[-3000:]
    return {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}


def losses(text: str):
    return [float(r["loss"]) for _, r in sorted(train_inner(text).items())]


def epoch_sums(run, updates_per_epoch: int = 4):
    """Summed loss per epoch: every epoch sees the same documents (a batch's loss is not comparable
    with another batch's: other documents, other numbers of spans)."""
    return [sum(run[i:i + updates_per_epoch]) for i in range(0, len(run), updates_per_epoch)]


def test_whole_document_fp32_resume_and_segmented_bf16(coref_data, converted_dir, tmp_path, caplog, capsys):  # noqa: F811
    save, out = tmp_path / "save", tmp_path / "conll_out"
    first = [coref_data, *TINY, *TRAIN, "--max-update", "8", "--save-dir", save, "--write-conll", out,
             "--finetune-from-model", converted_dir / "model.pt"]
    text = train(first, caplog)
    assert f"loading pretrained model from {converted_dir / 'model.pt'}" in text
    run = losses(text)
    assert len(run) == 8 and all(map(lambda x: x == x, run)), run
    first_epoch, second_epoch = epoch_sums(run)
    assert second_epoch < first_epoch, run
    logged = valid_line(text)
    scored = coref_score.score_files(str(out / "valid.key_conll"), str(out / "valid.response_conll"))
    for metric in ("muc", "bcub", "ceafe"):
        assert logged[f"{metric}_f1"] == pytest.approx(round(100 * scored[metric].f1, 2), abs=0.006)
    assert logged["conll_f1"] == pytest.approx(100 * coref_score.conll_f1(scored), abs=0.006)
    assert scored["muc"].recall_den > 0  # the key has links: the metrics scored something real

    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    groups = state["last_optimizer_state"]["param_groups"]
    assert len(groups) == 2 and groups[1]["lr"] == pytest.approx(10 * groups[0]["lr"])

    # the export refuses the head in one line, writes nothing; --encoder-only exports the encoder
    assert export_hf.main([str(save / "checkpoint_last.pt"), str(tmp_path / "hf")]) == 2
    assert "a coreference head" in capsys.readouterr().err and not (tmp_path / "hf").exists()
    assert export_hf.main([str(save / "checkpoint_last.pt"), str(tmp_path / "hf"), "--encoder-only"]) == 0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == ["LongformerForMaskedLM"]

    resumed = train([*first[:-2], "--max-update", "9"], caplog)
    assert "(epoch" in resumed and "@ 8 updates)" in resumed, resumed[-2000:]
    assert sorted(train_inner(resumed)) == [9]

    segmented = train([coref_data, *TINY, *TRAIN, "--max-update", "8", "--save-dir", tmp_path / "save_seg",
                       "--segment-length", "32", "--bf16", "--finetune-from-model", converted_dir / "model.pt"], caplog)
    assert "segments of 32 subwords" in segmented
    run = losses(segmented)
    first_epoch, second_epoch = epoch_sums(run)
    assert len(run) == 8 and second_epoch < first_epoch, run
    assert set(valid_line(segmented)) >= {"muc_f1", "bcub_f1", "ceafe_f1", "conll_f1", "loss"}
