"""Fixtures of the LED tests: a tiny document -> summary data set made from the bundled KJV, a
stock fairseq BART trained on it for a few updates (``fairseq-train --arch bart_base --task
translation``, 2 + 2 layers, 32 wide, 32 source positions) and its LED conversion.

The pairs: source = the first 8 .. 30 words of a paragraph, target = 5 of its words. Only the
pipeline matters here (shapes, flags, equality with BART), not what the model learns.
"""
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_longformer  # noqa: F401  (registers the plugin)
from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint

from tests.conftest import KJV, REPO

BIN = Path(sys.executable).parent
SOURCE_POSITIONS = 32  # the tiny BART's encoder (and decoder) positions
LED_POSITIONS = 4 * SOURCE_POSITIONS
TINY_BART = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32",
             "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
             "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
LANGS = ["--source-lang", "src", "--target-lang", "tgt"]


def run(cmd, log: Path, cwd=REPO) -> str:
    """Run a fairseq command line with one thread (the machine is shared); assert it finished."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=cwd, timeout=300)
    log.write_text(result.stdout)
    # fairseq-train can die at interpreter exit after finishing ("terminate called without an
    # active exception", seen here); its checkpoint is saved by then
    finished = "done training in" in result.stdout
    assert result.returncode == 0 or finished, f"{' '.join(map(str, cmd))}\n{result.stdout[-3000:]}"
    return result.stdout


def _pairs(books, count: int, seed: int):
    rng = random.Random(seed)
    paragraphs = []
    for book in books:
        for paragraph in book.read_text(encoding="utf-8").split("\n\n"):
            words = re.findall(r"\w+|[^\w\s]", paragraph.lower())
            if len(words) >= 12:
                paragraphs.append(words)
    rng.shuffle(paragraphs)
    pairs = []
    for words in paragraphs[:count]:
        n = rng.randint(8, SOURCE_POSITIONS - 2)  # + </s> stays within the positions
        pairs.append((" ".join(words[:n]), " ".join(words[n - 7:n - 2])))
    return pairs


@pytest.fixture(scope="session")
def led_data_bin(tmp_path_factory) -> Path:
    """Binarized src -> tgt pairs with one joined dictionary (BART shares all embeddings)."""
    work = tmp_path_factory.mktemp("led_data")
    books = sorted(KJV.glob("*.txt"))
    splits = {"train": _pairs(books[:3], 160, 1), "valid": _pairs(books[3:4], 16, 2), "test": _pairs(books[4:5], 6, 3)}
    for split, pairs in splits.items():
        (work / f"{split}.src").write_text("".join(s + "\n" for s, _ in pairs))
        (work / f"{split}.tgt").write_text("".join(t + "\n" for _, t in pairs))
    run([BIN / "fairseq-preprocess", *LANGS, "--trainpref", work / "train", "--validpref", work / "valid",
         "--testpref", work / "test", "--destdir", work / "bin", "--joined-dictionary", "--nwordssrc", "600",
         "--workers", "1"], work / "preprocess.log")
    return work / "bin"


@pytest.fixture(scope="session")
def bart_dir(led_data_bin, tmp_path_factory) -> Path:
    """A stock fairseq BART folder (model.pt + dict.txt), trained for 3 updates."""
    work = tmp_path_factory.mktemp("bart")
    run([BIN / "fairseq-train", led_data_bin, "--arch", "bart_base", "--task", "translation", *LANGS,
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", *TINY_BART,
         "--max-source-positions", SOURCE_POSITIONS, "--max-target-positions", SOURCE_POSITIONS,
         "--batch-size", "16", "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "fixed",
         "--max-update", "3", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
         "--save-dir", work / "save", "--log-format", "simple"], work / "train.log")
    folder = work / "bart"
    folder.mkdir()
    (folder / "model.pt").write_bytes((work / "save" / "checkpoint_last.pt").read_bytes())
    (folder / "dict.txt").write_bytes((led_data_bin / "dict.src.txt").read_bytes())
    return folder


@pytest.fixture(scope="session")
def led_dir(bart_dir, tmp_path_factory) -> Path:
    """The BART converted: 4x the encoder positions, one-sided window 32 (covers any input the
    tiny BART takes, so the LED must equal it)."""
    out = tmp_path_factory.mktemp("led") / "led"
    convert_bart_checkpoint(bart_dir, out, max_positions=LED_POSITIONS, attention_window="32")
    return out


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)
