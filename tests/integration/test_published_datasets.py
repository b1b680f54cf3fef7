"""The published datasets end to end on small schema-exact copies: read by
longformer-prepare-task, then the per-dataset recipes (CPU=1) fine-tune a converted Longformer
(a stock fairseq RoBERTa trained for one update on the data's own vocabulary, converted by
longformer-convert-roberta) on IMDB and Hyperpartisan and train and evaluate (EM/F1) on
TriviaQA; the arXiv files train an LED (a converted stock BART) and fairseq-generate decodes."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint
from fairseq_longformer.conversion.fairseq_sources import convert_roberta_checkpoint
from tests.conftest import REPO
from tests.support.finetune_models import batch, task_and_model
from tests.preprocessing.published_samples import write_aclimdb, write_arxiv, write_hyperpartisan, write_triviaqa
from tests.support.training import FAIRSEQ_TRAIN, subprocess_env, train_inner

BIN = Path(sys.executable).parent
TINY = ["--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
        "--encoder-attention-heads", "4"]
ROBERTA_POSITIONS, POSITIONS, WINDOW = 32, 128, 8
RECIPE_ENV = {"CPU": "1", "MAX_POSITIONS": str(POSITIONS), "ATTENTION_WINDOW": str(WINDOW), "MODEL_ARGS": " ".join(TINY),
              "ARCH": "longformer_base", "BATCH_SIZE": "4", "MAX_UPDATE": "3"}
COMMON = ["--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "fixed", "--cpu", "--num-workers", "0",
          "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1"]


def run_logged(cmd, log: Path, timeout: float, env=None, cwd=REPO) -> str:
    """Run a fairseq command line (or a recipe) into ``log``; assert it finished. fairseq-train
    can die at interpreter exit after finishing ("terminate called without an active exception",
    seen here): its checkpoint is saved by then."""
    result = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env or subprocess_env(), cwd=cwd, timeout=timeout)
    log.write_text(result.stdout)
    finished = "done training in" in result.stdout or "Generate valid" in result.stdout
    assert result.returncode == 0 or finished, f"{' '.join(map(str, cmd))}\n{result.stdout[-3000:]}"
    return result.stdout


def prepare(*args) -> None:
    done = subprocess.run([sys.executable, "-m", "longformer_preprocessing.task_data", *map(str, args)],
                          capture_output=True, text=True, env=subprocess_env())
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("published")


@pytest.fixture(scope="module")
def imdb_data(work) -> Path:
    """IMDB with a sentencepiece model trained on its reviews: the vocabulary of every model here."""
    write_aclimdb(work / "aclImdb" / "train", 16, seed=1)
    write_aclimdb(work / "aclImdb" / "test", 4, seed=2)
    prepare("imdb", "--train", work / "aclImdb" / "train", "--valid", work / "aclImdb" / "test",
            "--destdir", work / "imdb", "--train-sentencepiece", "600")
    return work / "imdb"


def same_vocabulary(imdb_data):
    return ["--sentencepiece-model", imdb_data / "spm.model", "--srcdict", imdb_data / "input0" / "dict.txt"]


@pytest.fixture(scope="module")
def converted(imdb_data, work) -> Path:
    """A stock RoBERTa (fairseq-train --task masked_lm, one update on the IMDB tokens), converted."""
    save = work / "roberta_save"
    run_logged([FAIRSEQ_TRAIN, imdb_data / "input0", "--task", "masked_lm", "--criterion", "masked_lm",
                "--arch", "roberta_base", *TINY, "--tokens-per-sample", ROBERTA_POSITIONS,
                "--max-positions", ROBERTA_POSITIONS, "--batch-size", "8", "--max-update", "1",
                "--disable-validation", "--save-dir", save, *COMMON], work / "roberta.log", timeout=240)
    folder = work / "roberta"
    folder.mkdir()
    (folder / "model.pt").write_bytes((save / "checkpoint_last.pt").read_bytes())
    (folder / "dict.txt").write_bytes((imdb_data / "input0" / "dict.txt").read_bytes())
    convert_roberta_checkpoint(folder, work / "longformer", max_positions=POSITIONS, attention_window=str(WINDOW))
    return work / "longformer" / "model.pt"


def run_recipe(recipe: str, data: Path, restore: Path, save: Path, log: Path, *extra) -> str:
    env = dict(subprocess_env(), **RECIPE_ENV, DATA=str(data), RESTORE=str(restore), SAVE_DIR=str(save),
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return run_logged(["bash", REPO / "recipes" / recipe, *extra], log, timeout=300, env=env, cwd=REPO)


def valid_metrics(text: str) -> dict:
    lines = [line for line in text.splitlines() if "valid on 'valid' subset" in line]
    assert lines, text[-3000:]
    return {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}


@pytest.mark.parametrize("dataset", ["imdb", "hyperpartisan"])
def test_classification_recipes_fine_tune_a_converted_model(dataset, imdb_data, converted, work):
    if dataset == "imdb":
        data = imdb_data
    else:
        write_hyperpartisan(work / "hp", 30, seed=3)
        data = work / "hyperpartisan"
        prepare("hyperpartisan", "--articles", work / "hp" / "articles-training-byarticle-20181122.xml",
                "--labels", work / "hp" / "ground-truth-training-byarticle-20181122.xml", "--destdir", data,
                *same_vocabulary(imdb_data))
    text = run_recipe(f"finetune_{dataset}.sh", data, converted, work / f"save_{dataset}", work / f"{dataset}.log")
    assert f"loading pretrained model from {converted}" in text, text[-3000:]
    assert sorted(train_inner(text)) == [1, 2, 3]
    valid = valid_metrics(text)
    examples = json.loads((data / "stats.json").read_text())["splits"]["valid"]["examples"]
    correct = valid["accuracy"] / 100 * examples  # every valid document scored
    assert abs(correct - round(correct)) < 0.01


@pytest.fixture(scope="module")
def triviaqa_data(imdb_data, work) -> Path:
    write_triviaqa(work / "tq", 6, seed=4)
    prepare("triviaqa", "--train", work / "tq" / "qa" / "wikipedia-train.json",
            "--valid", work / "tq" / "qa" / "wikipedia-dev.json", "--evidence", work / "tq" / "evidence" / "wikipedia",
            "--destdir", work / "triviaqa", "--max-train-context-tokens", "200", *same_vocabulary(imdb_data))
    return work / "triviaqa"


def test_triviaqa_trains_and_evaluates_em_f1(triviaqa_data, converted, work):
    text = run_recipe("finetune_triviaqa.sh", triviaqa_data, converted, work / "save_tq", work / "tq.log",
                      "--doc-stride", "48", "--max-question-tokens", "24")
    assert sorted(train_inner(text)) == [1, 2, 3]
    assert "valid: 7 examples of 6 questions, scored per question" in text
    valid = valid_metrics(text)
    assert 0 <= valid["em"] <= valid["f1"] <= 100
    correct = valid["em"] / 100 * 6  # 6 dev questions, one page each, every page scored
    assert abs(correct - round(correct)) < 0.01


def test_triviaqa_loss_is_the_log_sum_over_every_alias_occurrence(triviaqa_data):
    """The criterion's loss of a batch of whole dev pages against a direct computation: per window,
    -log of the summed start probability of every gold occurrence inside it (and of its ends),
    <s> where none falls inside."""
    task, model, args = task_and_model(triviaqa_data, "longformer_qa", "--doc-stride", "48",
                                       "--max-question-tokens", "24")
    criterion = task.build_criterion(args)
    sample = batch(task, "valid", [0, 1])
    loss, windows, _ = criterion(model, sample)
    with torch.no_grad():
        logits, _ = model(**sample["net_input"], span_head_name="qa")
    tokens = sample["net_input"]["src_tokens"]
    expected, occurrences = 0.0, 0
    for row in range(windows):
        record = sample["window_records"][row]  # the window's own page
        prefix, offset = int(sample["window_prefix"][row]), int(sample["window_offset"][row])
        length = int(sample["window_length"][row])
        inside = [(a, b) for a, b in record["spans"] if offset <= a and b < offset + length]
        occurrences += len(inside)
        starts = [prefix + a - offset for a, _ in inside] or [0]
        ends = [prefix + b - offset for _, b in inside] or [0]
        real = tokens[row] != task.dictionary.pad()
        p_start = logits[row, real, 0].softmax(-1)
        p_end = logits[row, real, 1].softmax(-1)
        expected += -math.log(sum(p_start[i] for i in set(starts))) - math.log(sum(p_end[i] for i in set(ends)))
    assert occurrences >= 4  # two names per page, several windows
    first_item = {r["page"] for r, e in zip(sample["window_records"], sample["window_example"].tolist()) if e == 0}
    assert len(first_item) == 2  # item 0: question 0's two pages
    assert math.isclose(float(loss.detach()), expected, rel_tol=1e-5)


def test_arxiv_trains_an_led_and_generates(imdb_data, work):
    wrote = write_arxiv(work / "train.txt", 12, seed=5)
    write_arxiv(work / "val.txt", 3, seed=6)
    data = work / "arxiv"
    prepare("arxiv", "--train", work / "train.txt", "--valid", work / "val.txt", "--destdir", data,
            "--max-source-tokens", "120", "--max-target-tokens", "30", *same_vocabulary(imdb_data))
    langs = ["--source-lang", "src", "--target-lang", "tgt"]
    bart = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
            "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4",
            "--decoder-attention-heads", "4"]
    save = work / "bart_save"
    run_logged([FAIRSEQ_TRAIN, data, "--arch", "bart_base", "--task", "translation", *langs, *bart,
                "--criterion", "label_smoothed_cross_entropy", "--max-source-positions", "32",
                "--max-target-positions", "32", "--batch-size", "8", "--max-update", "1", "--disable-validation",
                "--save-dir", save, "--truncate-source", "--skip-invalid-size-inputs-valid-test", *COMMON],
               work / "bart.log", timeout=240)
    folder = work / "bart"
    folder.mkdir()
    (folder / "model.pt").write_bytes((save / "checkpoint_last.pt").read_bytes())
    (folder / "dict.txt").write_bytes((data / "dict.src.txt").read_bytes())
    convert_bart_checkpoint(folder, work / "led", max_positions=128, attention_window="8")
    env = dict(subprocess_env(), CPU="1", DATA=str(data), LED=str(work / "led"), ARCH="led_base", MODEL_ARGS=" ".join(bart),
               MAX_SOURCE="128", MAX_TARGET="32", WINDOW="8", SAVE_DIR=str(work / "led_save"), LOG_INTERVAL="1",
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    text = run_logged(["bash", REPO / "recipes" / "led_arxiv.sh"], work / "led.log", timeout=300, env=env, cwd=REPO)
    assert sorted(train_inner(text)) == [1, 2] and "LED encoder: 128 positions" in text
    out = run_logged([BIN / "fairseq-generate", data, "--user-dir", REPO / "fairseq_longformer", "--task", "translation",
                      *langs, "--path", work / "led_save" / "checkpoint_last.pt", "--max-source-positions", "128",
                      "--max-target-positions", "32", "--gen-subset", "valid", "--beam", "2", "--max-len-b", "8",
                      "--batch-size", "4", "--required-batch-size-multiple", "1", "--cpu"], work / "generate.log",
                     timeout=240)
    assert sorted(int(i) for i in re.findall(r"^H-(\d+)\t", out, flags=re.M)) == [0, 1, 2]
    assert len(wrote["pairs"]) == 12
