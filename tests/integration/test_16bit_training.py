"""16-bit training of every model family through fairseq's own command lines, on CPU.

Each family trains the same tiny model from the same seed three times: fp32, ``--bf16`` (bf16
model, fp32 master weights: needs compat's ``_bf16_without_a_tpu``, fairseq would look for a
TPU) and ``--memory-efficient-fp16`` (fp16 model, no fp32 copy, dynamic loss scaling; plain
``--fp16`` needs CUDA). Dropout and attention dropout are on, batches are padded, and the
fine-tuning tasks and LED have global tokens (the masked LM and the causal char-LM have none:
the paper uses none there). Checked for each run:

- every logged loss and gradient norm is finite;
- the losses follow fp32's within ``tolerance`` (below);
- ``precision_probe.py`` saw the attention core receive q, k, v in the run's 16-bit dtype while
  every softmax inside it exponentiated fp32 scores.

Tolerance, at update t: |loss16 - loss32| <= u * loss32 * (1 + t) + 0.001, u the unit roundoff
of the 16-bit dtype (2^-8 for bf16's 8-bit significand, 2^-11 for fp16's 11 bits). The first
term: the loss of a 16-bit model is right to about one rounding of its own size (the per-token
losses are accumulated in fp32, where their independent rounding errors average out; what
remains is at most the rounding of the logits, relative u), and every update adds at most one
more: it is computed in fp32 from gradients carrying relative error u, and Adam's normalised
step turns that into a weight change off by u of its size, which moves the next loss by at most
u of it. The second term is the log's precision (losses printed with 3 decimals, each side
rounded by 0.0005). Over 6 updates that is 0.25 bits for bf16 and 0.03 for fp16 at a loss of 9;
the runs stay far inside it (docs/precision.md has the numbers). It is tight enough to fail:
each test also checks that fp32's loss falls by more than the bf16 tolerance over the run, so a
16-bit run that does not learn, or learns something else, cannot pass.
"""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from longformer_preprocessing.chars import prepare

from tests.charlm.test_train_eval import BLOCK, BOOKS, TINY_LM
from tests.conftest import KJV, REPO, TINY_MODEL_ARGS
from tests.finetune.conftest import TINY_FINETUNE_ARGS, classification_data, kjv_jsonl, qa_data  # noqa: F401
from tests.led.conftest import LANGS, LED_POSITIONS, bart_dir, led_data_bin  # noqa: F401
from tests.training.training_helpers import subprocess_env, tail, train_inner

PROBE = Path(__file__).with_name("precision_probe.py")
PRECISIONS = {"fp32": [], "bf16": ["--bf16"], "fp16": ["--memory-efficient-fp16"]}
DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}
UNIT_ROUNDOFF = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
LOG_DECIMALS = 0.001  # fairseq prints losses with 3 decimals
UPDATES = 6
# every run: dropout on, a fixed seed, one process, the log of every update
RUN = ["--dropout", "0.1", "--attention-dropout", "0.1", "--seed", "5", "--cpu", "--num-workers", "0",
       "--log-format", "simple", "--log-interval", "1", "--max-update", str(UPDATES)]


def run_probed(module: str, args, workdir: Path, name: str):
    """Runs ``module``'s cli_main (fairseq_cli.train: fairseq-train) with the probes; returns
    (its output, the probe's record)."""
    record = workdir / f"{name}.probe.json"
    log = workdir / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, str(PROBE), str(record), module, *map(str, args)], stdout=out,
                              stderr=subprocess.STDOUT, cwd=REPO, env=subprocess_env(), timeout=400)
    text = log.read_text()
    finished = module != "fairseq_cli.train" or "done training in" in text
    assert proc.returncode == 0 or finished, f"{module} {name} exit {proc.returncode}\n{tail(log)}"
    return text, json.loads(record.read_text())


def tolerance(precision: str, loss32: float, update: int) -> float:
    return UNIT_ROUNDOFF[precision] * abs(loss32) * (1 + update) + LOG_DECIMALS


def check_probe(record: dict, precision: str) -> None:
    assert record["qkv"], "the attention core was never called"
    assert {tuple(call) for call in record["qkv"]} == {(DTYPES[precision],) * 3}
    assert record["softmax"] and set(record["softmax"]) == {"torch.float32"}, set(record["softmax"])


def train_three_ways(args, workdir: Path, save: bool = False):
    """fairseq-train in fp32, bf16 and fp16 on ``args``: {precision: per-update records}, and
    each run's save dir when ``save``."""
    records, saves = {}, {}
    for precision, flags in PRECISIONS.items():
        save_args = ["--save-dir", workdir / f"save_{precision}", "--no-epoch-checkpoints"] if save else ["--no-save"]
        text, probe = run_probed("fairseq_cli.train", [*args, *RUN, *flags, *save_args], workdir, precision)
        check_probe(probe, precision)
        records[precision] = train_inner(text)
        saves[precision] = workdir / f"save_{precision}"
        scaled = [" loss_scale=" in line for line in text.splitlines() if "train_inner" in line]
        # fairseq's dynamic loss scaler is on for fp16, off for bf16 (fp32's exponent range)
        assert scaled and all(scaled) is (precision == "fp16") and any(scaled) is (precision == "fp16")
    compare_losses(records)
    return records, saves


def compare_losses(records: dict) -> None:
    fp32 = records["fp32"]
    assert sorted(fp32) == list(range(1, UPDATES + 1))
    for precision in ("bf16", "fp16"):
        assert sorted(records[precision]) == sorted(fp32), precision
        for update, ref in fp32.items():
            got = records[precision][update]
            assert math.isfinite(got["loss"]) and math.isfinite(got["gnorm"]), (precision, update, got)
            assert abs(got["loss"] - ref["loss"]) <= tolerance(precision, ref["loss"], update), (
                precision, update, got["loss"], ref["loss"], tolerance(precision, ref["loss"], update))
    # the runs learn: fp32's loss falls by more than the widest tolerance of the comparison
    first, last = fp32[1]["loss"], fp32[UPDATES]["loss"]
    print({p: [round(r[u]["loss"], 4) for u in sorted(r)] for p, r in records.items()})
    assert first - last > tolerance("bf16", last, UPDATES), (first, last)


def test_bf16_without_tpu_flag_keeps_a_requested_tpu(monkeypatch):
    """The compat patch drops the TPU fairseq implies for --bf16, and only that one."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq import options
    from fairseq.distributed import utils as distributed_utils

    import fairseq_longformer  # noqa: F401

    seen = []
    for argv, expected in ((["--bf16"], False), (["--bf16", "--tpu"], True), ([], False)):
        monkeypatch.setattr(sys, "argv", ["fairseq-train", "data", "--task", "language_modeling", "--arch", "transformer_lm", *argv])
        args = options.parse_args_and_arch(options.get_training_parser(), input_args=sys.argv[1:])
        cfg = convert_namespace_to_omegaconf(args)
        assert cfg.common.tpu is (bool(argv))  # fairseq's own parse: --bf16 implies --tpu
        distributed_utils.call_main(cfg, lambda c, **kw: seen.append(c.common.tpu))
        assert seen[-1] is expected, argv


def test_masked_lm(kjv_data_bin, tmp_path):
    train_three_ways([kjv_data_bin, *TINY_MODEL_ARGS, "--batch-size", "4", "--optimizer", "adam", "--lr", "3e-3",
                      "--disable-validation"], tmp_path)
