"""The char-LM through fairseq's own command lines, on four small KJV books at character level:
``fairseq-train --task language_modeling --arch longformer_lm`` (the loss falls, below the
corpus's unigram bits per character), ``fairseq-eval-lm --context-window`` (its "Loss (base
2)" is the bits per character computed here by hand over the same windows), and sampling with
``fairseq-interactive`` (step-by-step decoding with the cache)."""
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data.indexed_dataset import MMapIndexedDataset

from longformer_preprocessing.chars import prepare

from tests.conftest import KJV, REPO

BIN = Path(sys.executable).parent
BOOKS = ["08-Ruth.txt", "32-Jonah.txt", "31-Obadiah.txt", "65-Jude.txt"]
BLOCK = 128  # --tokens-per-sample in training, hence the model's positions
TINY_LM = ["--arch", "longformer_lm", "--decoder-layers", "2", "--decoder-embed-dim", "64",
           "--decoder-ffn-embed-dim", "128", "--decoder-attention-heads", "4",
           "--attention-window", "8,16", "--attention-dilation", "1,1:1:2:2", "--dropout", "0.0"]


def _run(args, **kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data folder, checkpoint, fairseq-train's output) of 80 updates (about 5 s)."""
    root = tmp_path_factory.mktemp("charlm")
    prepare("chars", [str(KJV / b) for b in BOOKS], str(root / "data"), valid_size="4000", test_size="2000")
    log = _run([BIN / "fairseq-train", root / "data", "--task", "language_modeling", "--user-dir",
                "fairseq_longformer", *TINY_LM, "--tokens-per-sample", BLOCK, "--sample-break-mode", "none",
                "--batch-size", "8", "--optimizer", "adam", "--lr", "3e-3", "--lr-scheduler", "inverse_sqrt",
                "--warmup-updates", "10", "--clip-norm", "0.25", "--max-update", "80", "--cpu",
                "--save-dir", root / "ckpt", "--no-epoch-checkpoints", "--log-format", "json",
                "--log-interval", "10", "--num-workers", "0", "--seed", "1"])
    return root / "data", root / "ckpt" / "checkpoint_last.pt", log


def test_fairseq_train_loss_falls_below_the_unigram_baseline(trained):
    data, checkpoint, log = trained
    assert "LongformerLanguageModel" in log and "IncrementalLongformerSelfAttention" in log
    losses = [float(json.loads(m)["loss"]) for m in re.findall(r"train_inner \| (\{.*\})", log)]
    assert len(losses) == 8 and losses[-1] < losses[0] - 1.0, losses  # bits per character
    valid = [float(v) for v in re.findall(r'"valid_loss": "([\d.]+)"', log)]
    unigram = json.loads((data / "chars.json").read_text())["unigram_bits_per_char"]["valid"]
    assert valid[-1] < unigram - 0.5, (valid, unigram)


def _bits_by_hand(data, checkpoint, scored, context):
    """fairseq-eval-lm's quantity, computed here: the valid split as one token stream (its items
    one after another, as --sample-break-mode none reads it), the model's input that stream
    shifted right behind a </s>; blocks of ``scored`` targets, each scored with up to ``context``
    earlier inputs in front. Returns the mean -log2 p over every token."""
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    model = model.double().eval()
    split = MMapIndexedDataset(str(data / "valid"))
    stream = torch.from_numpy(np.concatenate([split[i].numpy() for i in range(len(split))]).astype(np.int64))
    inputs = torch.cat([torch.tensor([task.dictionary.eos()]), stream[:-1]])
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(stream), scored):
            lo, hi = max(0, start - context), min(len(stream), start + scored)
            log_probs = torch.log_softmax(model(inputs[None, lo:hi])[0][0], dim=-1)
            picked = log_probs[start - lo:].gather(1, stream[start:hi, None])
            total -= picked.sum().item()
    return total / len(stream) / math.log(2)


def test_fairseq_eval_lm_context_window_reports_bits_per_character(trained):
    """--tokens-per-sample is the whole window, --context-window its unscored part: 128 = 96 + 32."""
    data, checkpoint, _ = trained
    out = _run([BIN / "fairseq-eval-lm", data, "--path", checkpoint, "--user-dir", "fairseq_longformer",
                "--gen-subset", "valid", "--tokens-per-sample", BLOCK, "--context-window", "96",
                "--batch-size", "4", "--cpu", "--num-workers", "0"])
    reported = float(re.search(r"Loss \(base 2\): ([\d.]+)", out).group(1))
    assert "Evaluated 4,002 tokens" in out  # 4,000 characters and the two pieces' </s>
    assert reported == pytest.approx(_bits_by_hand(data, checkpoint, scored=32, context=96), abs=1e-4)


def test_sampling_with_fairseq_interactive(trained):
    """fairseq's sampler drives the cached step-by-step decoding: the prompt, then characters of
    the dictionary up to --max-len-b (60, the prompt's 8 included)."""
    data, checkpoint, _ = trained
    out = _run([BIN / "fairseq-interactive", data, "--path", checkpoint, "--user-dir", "fairseq_longformer",
                "--task", "language_modeling", "--sampling", "--sampling-topk", "5", "--beam", "1",
                "--max-len-b", "60", "--min-len", "60", "--cpu", "--seed", "3"],
               input="T h e <U+0020> L O R D\n")
    hypothesis = re.search(r"^H-0\t\S+\t(.*)$", out, re.M).group(1).split()
    symbols = {line.rsplit(" ", 1)[0] for line in (data / "dict.txt").read_text(encoding="utf-8").splitlines()}
    assert hypothesis[:8] == ["T", "h", "e", "<U+0020>", "L", "O", "R", "D"]
    assert len(hypothesis) == 60 and set(hypothesis) <= symbols
