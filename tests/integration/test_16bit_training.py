"""16-bit training of every model family through fairseq's own command lines, on CPU (with
``pytest --device cuda`` the same runs on the GPU: no ``--cpu``, tests/support/device.py).

Each family trains the same tiny model from the same seed three times: fp32, ``--bf16`` (bf16
model, fp32 master weights: needs the runtime's ``shims.bf16_without_a_tpu``, fairseq would look for a
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
each test also checks that fp32's losses move by more than the bf16 tolerance over the run, so
the comparison sees the trajectory, not a constant.
"""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from longformer_preprocessing.chars import prepare

from tests.integration.test_charlm_train_eval import BLOCK, BOOKS, TINY_LM
from tests.conftest import KJV, REPO, TINY_MODEL_ARGS
from tests.support.finetune_data import TINY_FINETUNE_ARGS, classification_data, kjv_jsonl, qa_data  # noqa: F401
from tests.support.led_models import LANGS, LED_POSITIONS, bart_dir, led_data_bin  # noqa: F401
from tests.support.device import cpu_flag, device
from tests.support.training import subprocess_env, tail, train_inner

PROBE = Path(__file__).with_name("precision_probe.py")
# fp16 starts its dynamic loss scale at 32, not fairseq's 128: at 128 the char-LM's first step
# overflows (the tied embedding's gradient for a frequent character, summed over 1,024 positions,
# exceeds 65,504 once scaled), and fairseq skips that step and halves the scale, which is how the
# scaler finds its scale, but then update t of fp16 is a different batch from fp32's update t.
# Starting at a scale the scaler would settle on keeps every update a real one.
PRECISIONS = {"fp32": [], "bf16": ["--bf16"], "fp16": ["--memory-efficient-fp16", "--fp16-init-scale", "32"]}
DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}
UNIT_ROUNDOFF = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
LOG_DECIMALS = 0.001  # fairseq prints losses with 3 decimals
UPDATES = 6
# every run: dropout on, a fixed seed, one process, the log of every update
RUN = ["--dropout", "0.1", "--attention-dropout", "0.1", "--seed", "5", *cpu_flag(), "--num-workers", "0",
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
    # on CUDA the Triton kernel exponentiates inside the kernel (fp32 accumulators), out of the
    # probes' sight: what remains visible (torch.softmax elsewhere) must still be fp32
    assert (record["softmax"] or device() != "cpu") and set(record["softmax"]) <= {"torch.float32"}, \
        set(record["softmax"])


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
        assert "gradient overflow" not in text, precision  # no update skipped: they line up
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
    # the comparison can fail: fp32's losses move by more than the widest tolerance over the run
    losses = [r["loss"] for r in fp32.values()]
    print({p: [r[u]["loss"] for u in sorted(r)] for p, r in records.items()})
    assert max(losses) - min(losses) > tolerance("bf16", min(losses), UPDATES), losses


def test_bf16_without_tpu_flag_keeps_a_requested_tpu(monkeypatch):
    """The runtime patch drops the TPU fairseq implies for --bf16, and only that one."""
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


def test_fp16_gradient_overflow_skips_the_step_on_cpu(kjv_data_bin, tmp_path):
    """An initial loss scale of 2^24 overflows: fairseq skips the step and halves the scale, on CPU
    too (the runtime's ``shims.fp16_overflow_on_cpu``: fairseq made a CUDA tensor there)."""
    text, _ = run_probed("fairseq_cli.train", [
        kjv_data_bin, *TINY_MODEL_ARGS, "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3",
        "--disable-validation", "--no-save", *RUN[:-1], "3", "--memory-efficient-fp16",
        "--fp16-init-scale", str(2 ** 24)], tmp_path, "overflow")
    assert "gradient overflow detected, ignoring gradient, setting loss scale to: 8388608.0" in text
    assert sorted(train_inner(text)) == [1, 2, 3]


@pytest.mark.device
def test_masked_lm(kjv_data_bin, tmp_path):
    train_three_ways([kjv_data_bin, *TINY_MODEL_ARGS, "--batch-size", "4", "--optimizer", "adam", "--lr", "3e-3",
                      "--disable-validation"], tmp_path)


FINETUNE = ["--optimizer", "adam", "--lr", "3e-3", "--disable-validation"]


@pytest.mark.device
def test_classification_fine_tuning(classification_data, tmp_path):
    """<s> is global (the task's default), documents padded to the batch's longest."""
    train_three_ways([classification_data, *TINY_FINETUNE_ARGS, "--task", "longformer_classification",
                      "--criterion", "longformer_classification", "--batch-size", "8", *FINETUNE], tmp_path)


@pytest.mark.device
def test_qa_fine_tuning(qa_data, tmp_path):
    """Every question token is global (the task's default)."""
    train_three_ways([qa_data, *TINY_FINETUNE_ARGS, "--task", "longformer_qa", "--criterion", "longformer_qa",
                      "--batch-size", "4", "--doc-stride", "64", *FINETUNE], tmp_path)


EVAL_PRECISION = {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}


@pytest.mark.device
def test_char_lm_with_relative_positions_then_eval_lm(tmp_path):
    """Relative positions (the band bias), a budget that makes the layers attend head by head,
    then fairseq-eval-lm of each checkpoint in its own precision."""
    data = tmp_path / "data"
    prepare("chars", [str(KJV / b) for b in BOOKS], str(data), valid_size="2000", test_size="1000")
    _, saves = train_three_ways(
        [data, "--task", "language_modeling", "--user-dir", REPO / "fairseq_longformer", *TINY_LM,
         "--relative-positions", "--relative-bias-budget-mb", "0.01", "--tokens-per-sample", BLOCK,
         "--sample-break-mode", "none", "--batch-size", "8", "--optimizer", "adam", "--lr", "3e-3",
         "--clip-norm", "0.25", "--disable-validation"], tmp_path, save=True)
    bits = {}
    for precision, flags in EVAL_PRECISION.items():
        text, probe = run_probed("fairseq_cli.eval_lm", [
            data, "--path", saves[precision] / "checkpoint_last.pt", "--user-dir", REPO / "fairseq_longformer",
            "--gen-subset", "valid", "--tokens-per-sample", BLOCK, "--context-window", "96", "--batch-size", "4",
            *cpu_flag(), "--num-workers", "0", *flags], tmp_path, f"eval_{precision}")
        check_probe(probe, precision)
        bits[precision] = float(re.search(r"Loss \(base 2\): ([\d.]+)", text).group(1))
        assert math.isfinite(bits[precision])
    print("eval-lm bits per character", bits)
    for precision in ("bf16", "fp16"):  # printed with 4 decimals
        assert abs(bits[precision] - bits["fp32"]) <= tolerance(precision, bits["fp32"], UPDATES), bits


@pytest.mark.device
def test_led_translation_then_generate(bart_dir, led_data_bin, tmp_path):
    """LED fine-tuned from a converted BART (--task translation), the first source token global
    (LED's default), sources padded; then fairseq-generate of each checkpoint in its precision."""
    from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint

    result = convert_bart_checkpoint(bart_dir, tmp_path / "led", max_positions=LED_POSITIONS, attention_window="4")
    _, saves = train_three_ways(
        [led_data_bin, "--user-dir", REPO / "fairseq_longformer", *result.train_flags(), *LANGS,
         "--batch-size", "16", "--optimizer", "adam", "--lr", "3e-3", "--lr-scheduler", "fixed",
         "--disable-validation"], tmp_path, save=True)
    pairs = len(Path(led_data_bin.parent / "test.src").read_text().splitlines())
    for precision, flags in EVAL_PRECISION.items():
        generate = [flag if flag != str(result.checkpoint) else str(saves[precision] / "checkpoint_last.pt")
                    for flag in result.generate_flags()]
        text, probe = run_probed("fairseq_cli.generate", [
            led_data_bin, "--user-dir", REPO / "fairseq_longformer", *generate, *LANGS, "--gen-subset", "test",
            "--beam", "2", "--max-len-b", "6", "--batch-size", "4", *cpu_flag(), *flags], tmp_path,
            f"generate_{precision}")
        check_probe(probe, precision)
        hypotheses = re.findall(r"^H-(\d+)\t(\S+)", text, flags=re.M)
        assert sorted(int(i) for i, _ in hypotheses) == list(range(pairs)), precision
        assert all(math.isfinite(float(score)) for _, score in hypotheses), precision
