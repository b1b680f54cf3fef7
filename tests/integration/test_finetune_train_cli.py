"""Short fairseq-train runs of both fine-tuning tasks through fairseq's CLI (``--user-dir``):
training steps, validation over every example, the tasks' metrics logged, a checkpoint that
restores into a new task (the head is new)."""
import re

import torch

from tests.support.finetune_data import TINY_FINETUNE_ARGS, VALID_EXAMPLES
from tests.support.training import FAIRSEQ_TRAIN, run_logged, train_inner

COMMON = ["--optimizer", "adam", "--lr", "1e-3", "--dropout", "0", "--seed", "3", "--cpu", "--num-workers", "0",
          "--log-format", "simple", "--log-interval", "1", "--no-epoch-checkpoints"]


def _valid(text: str) -> dict:
    lines = [line for line in text.splitlines() if "valid on 'valid' subset" in line]
    assert lines, text[-3000:]
    return {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}


def _whole_examples(percent: float) -> None:
    """A percentage of the 13 valid examples is k/13: no example was left out of validation."""
    count = percent / 100 * VALID_EXAMPLES
    assert abs(count - round(count)) < 0.01, percent


def test_classification_trains_and_validates_every_document(classification_data, tmp_path):
    save = tmp_path / "save"
    text = run_logged([FAIRSEQ_TRAIN, classification_data, *TINY_FINETUNE_ARGS, "--task", "longformer_classification",
                       "--criterion", "longformer_classification", "--batch-size", "8", "--max-epoch", "2",
                       "--no-global-projections", "--save-dir", save, *COMMON], tmp_path / "train.log", timeout=240)
    records = train_inner(text)
    assert len(records) == 12  # 48 documents, batch 8, 2 epochs
    valid = _valid(text)
    assert valid["bsz"] == VALID_EXAMPLES / 2  # batches of 8 and 5: the short one is kept
    _whole_examples(valid["accuracy"])
    assert 0 <= valid["f1"] <= 100
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["model"]
    assert "classification_heads.sentence_classification_head.out_proj.weight" in state
    assert not [k for k in state if "global_proj" in k]  # Q, K, V held once


def test_qa_trains_and_reports_em_f1_over_every_example(qa_data, classification_data, tmp_path):
    # start from the classification run's kind of checkpoint: the span head is new
    first = tmp_path / "cls"
    run_logged([FAIRSEQ_TRAIN, classification_data, *TINY_FINETUNE_ARGS, "--task", "longformer_classification",
                "--criterion", "longformer_classification", "--batch-size", "8", "--max-update", "1",
                "--disable-validation", "--save-dir", first, *COMMON], tmp_path / "cls.log", timeout=240)
    text = run_logged([FAIRSEQ_TRAIN, qa_data, *TINY_FINETUNE_ARGS, "--task", "longformer_qa",
                       "--criterion", "longformer_qa", "--batch-size", "4", "--max-update", "6",
                       "--doc-stride", "64", "--restore-file", first / "checkpoint_last.pt", "--reset-optimizer",
                       "--reset-dataloader", "--reset-meters", "--save-dir", tmp_path / "qa", *COMMON],
                      tmp_path / "qa.log", timeout=240)
    assert "Loaded checkpoint" in text and "deleting classification head" in text
    assert sorted(train_inner(text)) == list(range(1, 7))
    valid = _valid(text)
    for metric in ("em", "f1"):
        assert 0 <= valid[metric] <= 100
    _whole_examples(valid["em"])
    assert valid["f1"] >= valid["em"]
