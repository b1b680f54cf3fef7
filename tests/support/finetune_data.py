"""Fixtures of the fine-tuning tests: small classification and QA data sets made from the
bundled KJV by longformer_experiments.finetune_kjv and binarized by longformer-prepare-task, and
the tiny model's flags for the two tasks."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PYTHON = sys.executable
TRAIN_EXAMPLES, VALID_EXAMPLES = 48, 13

# a 2-layer, 64-wide Longformer, window 8 on each side: 2 layers see 16 tokens either way
TINY_FINETUNE_ARGS = [
    "--user-dir", str(REPO / "fairseq_longformer"), "--arch", "longformer_base",
    "--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
    "--encoder-attention-heads", "4", "--attention-window", "8", "--attention-dropout", "0",
    "--max-positions", "128", "--pad-to-multiple", "8",
]
WINDOW, LAYERS = 8, 2


def prepare(kind: str, out: Path, train: Path, valid: Path, *tokenizer: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "longformer_preprocessing.task_data", kind, "--train", str(train),
                           "--valid", str(valid), "--destdir", str(out), *tokenizer],
                          capture_output=True, text=True)


@pytest.fixture(scope="session")
def kjv_jsonl(tmp_path_factory) -> Path:
    """classification.{train,valid}.jsonl and qa.{train,valid}.jsonl, a few chapters each."""
    full = tmp_path_factory.mktemp("kjv_jsonl_full")
    subprocess.run([PYTHON, "-m", "longformer_experiments.finetune_kjv", str(full)], check=True, capture_output=True)
    out = tmp_path_factory.mktemp("kjv_jsonl")
    for kind in ("classification", "qa"):
        for split, n in (("train", TRAIN_EXAMPLES), ("valid", VALID_EXAMPLES)):
            lines = (full / f"{kind}.{split}.jsonl").read_text().splitlines()
            lines = lines[::len(lines) // n][:n]  # spread over the Bible: every label occurs
            (out / f"{kind}.{split}.jsonl").write_text("\n".join(lines) + "\n")
    return out


@pytest.fixture(scope="session")
def classification_data(kjv_jsonl, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cls") / "data"
    done = prepare("classification", out, kjv_jsonl / "classification.train.jsonl",
                   kjv_jsonl / "classification.valid.jsonl", "--train-sentencepiece", "400")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def qa_data(kjv_jsonl, classification_data, tmp_path_factory) -> Path:
    """QA data with the classification data's tokenizer and dictionary (one vocabulary)."""
    out = tmp_path_factory.mktemp("qa") / "data"
    done = prepare("qa", out, kjv_jsonl / "qa.train.jsonl", kjv_jsonl / "qa.valid.jsonl",
                   "--sentencepiece-model", str(classification_data / "spm.model"),
                   "--srcdict", str(classification_data / "input0" / "dict.txt"))
    assert done.returncode == 0, done.stderr
    return out
