"""``--relative-positions`` through fairseq's own command lines, on the KJV books of
test_train_eval.py: fairseq-train's loss falls below the unigram baseline; fairseq-eval-lm at 4x
the training length runs (no position table limits it) and gives the bits per character of the
training length (the model's reach, 8 + 16 * 2 = 40 characters, fits both windows, and nothing
depends on the absolute position), with a band-bias budget that makes every layer attend head
by head (``--relative-bias-budget-mb``). Generation beyond the training length:
test_relative_positions.py (fairseq's SequenceGenerator in-process)."""
import json
import re

import pytest

from longformer_preprocessing.chars import prepare

from tests.integration.test_charlm_train_eval import BIN, BLOCK, BOOKS, TINY_LM, _bits_by_hand, _run
from tests.conftest import KJV


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data folder, checkpoint, fairseq-train's output) of 80 updates with relative positions."""
    root = tmp_path_factory.mktemp("charlm_relative")
    prepare("chars", [str(KJV / b) for b in BOOKS], str(root / "data"), valid_size="4000", test_size="2000")
    log = _run([BIN / "fairseq-train", root / "data", "--task", "language_modeling", "--user-dir",
                "fairseq_longformer", *TINY_LM, "--relative-positions", "--tokens-per-sample", BLOCK,
                # a budget below one head's band: every layer attends head by head, recomputed in
                # backward, through fairseq-train and (saved in the checkpoint) fairseq-eval-lm
                "--relative-bias-budget-mb", "0.01",
                "--sample-break-mode", "none", "--batch-size", "8", "--optimizer", "adam", "--lr", "3e-3",
                "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "10", "--clip-norm", "0.25",
                "--max-update", "80", "--cpu", "--save-dir", root / "ckpt", "--no-epoch-checkpoints",
                "--log-format", "json", "--log-interval", "10", "--num-workers", "0", "--seed", "1"])
    return root / "data", root / "ckpt" / "checkpoint_last.pt", log


def test_fairseq_train_with_relative_positions_learns(trained):
    data, _, log = trained
    assert "relative_positions" in log and "r_proj" in log and "embed_positions" not in log
    losses = [float(json.loads(m)["loss"]) for m in re.findall(r"train_inner \| (\{.*\})", log)]
    assert len(losses) == 8 and losses[-1] < losses[0] - 1.0, losses  # bits per character
    valid = [float(v) for v in re.findall(r'"valid_loss": "([\d.]+)"', log)]
    unigram = json.loads((data / "chars.json").read_text())["unigram_bits_per_char"]["valid"]
    assert valid[-1] < unigram - 0.5, (valid, unigram)


def test_fairseq_eval_lm_at_four_times_the_training_length(trained):
    """4 x 128 characters per window, the last 32 scored: every character is scored (none skipped
    as too long), below the unigram baseline, and with the bits per character of windows of the
    training length (computed in-process as test_train_eval.py does): every scored character
    sees its whole reach in both, and nothing depends on the absolute position."""
    data, checkpoint, _ = trained
    out = _run([BIN / "fairseq-eval-lm", data, "--path", checkpoint, "--user-dir", "fairseq_longformer",
                "--gen-subset", "valid", "--tokens-per-sample", 4 * BLOCK, "--context-window", 4 * BLOCK - 32,
                "--batch-size", "4", "--cpu", "--num-workers", "0"])
    assert "Evaluated 4,002 tokens" in out
    at_four_times = float(re.search(r"Loss \(base 2\): ([\d.]+)", out).group(1))
    unigram = json.loads((data / "chars.json").read_text())["unigram_bits_per_char"]["valid"]
    assert at_four_times < unigram - 0.5
    at_training_length = _bits_by_hand(data, checkpoint, scored=32, context=BLOCK - 32)
    assert at_four_times == pytest.approx(at_training_length, abs=2e-4)  # printed to 4 decimals
