"""Every console script of setup.py, and fairseq-train / -eval-lm / -generate with the plugin,
against bad inputs: missing, empty, truncated, wrong kind, non-UTF-8, a fake archive, a malicious
pickle, destination = source. Each case must end with a non-zero exit, a last stderr line naming
the input and the fix, no traceback, and the folder of inputs exactly as before (a snapshot of
every file's bytes and every folder, before and after).

The console scripts run in-process (their ``main(argv)``); fairseq's CLIs run as subprocesses (they
parse sys.argv and report through the plugin's excepthook). ``test_print_table`` prints the table
of commands x inputs -> outcomes and fails when a selected case recorded none.
"""
import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pytest
import torch

from tests.conftest import REPO
from tests.support.in_process import run_fairseq_in_process
from tests.support.finetune_data import classification_data, kjv_jsonl  # noqa: F401  (fixtures)
from tests.plugin.test_checkpoints import RunsCode, stock_roberta  # noqa: F401  (fixture: a fairseq-train checkpoint)
from tests.support.corrupt import flipped_copy
from tests.support.system_states import disk_full, locked, onnx_disk_full, read_only, torchrun

BIN = Path(sys.executable).parent
PLUGIN = str(REPO / "fairseq_longformer")
OUTCOMES: List[Tuple[str, str, str]] = []
STARTED: List[Tuple[str, str]] = []  # the cases this process ran (pytest-xdist shares them out)
# what hydra (fairseq-hydra-train) prints after every failed job, after the error's own line
HYDRA_FOOTER = "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."


@dataclass
class Case:
    command: str  # a console script of setup.py, or fairseq-train / -eval-lm / -generate
    bad_input: str  # what is wrong, for the table
    argv: Callable[[Path], List[str]]  # given the world folder
    names: str  # what the last stderr line must name (a path, relative to the world, or a flag)
    fix: str  # and the fix it must give
    in_process: bool = False  # a fairseq CLI run in this process (its cli_main, sys.argv, the excepthook)
    condition: Optional[Callable[[pytest.MonkeyPatch, Path], None]] = None  # a simulated system state


def _world_files(world: Path, stock: Path, classification: Path) -> None:
    """The inputs: a real checkpoint and its poisoned twin, and broken files of every kind."""
    state = torch.load(stock, map_location="cpu", weights_only=False)
    (world / "ckdir").mkdir()
    (world / "ckdir" / "model.pt").write_bytes(stock.read_bytes())
    (world / "ckdir" / "dict.txt").write_bytes((Path(state["cfg"]["task"]["data"]) / "dict.txt").read_bytes())
    state["extra_state"]["payload"] = RunsCode(world / "RAN")
    (world / "evil").mkdir()
    torch.save(state, world / "evil" / "model.pt")
    (world / "evil" / "dict.txt").write_bytes((world / "ckdir" / "dict.txt").read_bytes())
    for name, data in (("empty", b""), ("text", b"hello\n"), ("truncated", stock.read_bytes()[:5000])):
        (world / name).mkdir()
        (world / name / "model.pt").write_bytes(data)
        (world / name / "dict.txt").write_bytes((world / "ckdir" / "dict.txt").read_bytes())
    flipped_copy(stock, world / "flipped" / "model.pt")  # one bit of a tensor: only the CRC tells
    (world / "flipped" / "dict.txt").write_bytes((world / "ckdir" / "dict.txt").read_bytes())
    (world / "not_a_dict.pt").write_bytes(b"")
    torch.save([1, 2, 3], world / "not_a_dict.pt")
    (world / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1") * 10)
    (world / "huge_line.txt").write_text("a" * 3_000_000)
    (world / "fake.zip").write_bytes(b"this is not a zip file")
    (world / "fake.gz").write_bytes(b"this is not gzip data")
    (world / "chars").mkdir()
    (world / "chars" / "input.txt").write_text("some characters to model\n" * 20)
    (world / "books").mkdir()
    (world / "books" / "a.txt").write_text("a book.\n\nwith two paragraphs.\n")
    (world / "bad.model").write_bytes(b"not a sentencepiece model")
    (world / "foreign").mkdir()
    (world / "foreign" / "train.bin").write_bytes(b"someone else's data")
    (world / "foreign" / "dict.txt").write_text("x 1\n")
    (world / "hf").mkdir()  # a Hugging Face folder exported earlier (the tools' marker in it)
    (world / "hf" / "config.json").write_text(json.dumps({"model_type": "longformer"}))
    (world / "hf" / ".written-by-fairseq-longformer").write_text("")
    (world / "hf_no_layers").mkdir()
    (world / "hf_no_layers" / "config.json").write_text(json.dumps({"model_type": "longformer", "vocab_size": 10}))
    (world / "bench.json").write_text("{not json")
    (world / "bench_latin1.json").write_bytes(b"\xff\xfe{}")
    (world / "save").mkdir()  # an existing, empty --save-dir
    (world / "resume").mkdir()
    (world / "resume" / "checkpoint_last.pt").write_bytes((world / "evil" / "model.pt").read_bytes())
    (world / "decay").mkdir()  # a run saved without weight decay (one optimizer parameter group)
    (world / "decay" / "checkpoint_last.pt").write_bytes(stock.read_bytes())
    (world / "data").symlink_to(Path(state["cfg"]["task"]["data"]))
    (world / "cls").symlink_to(classification)
    (world / "hotpot").mkdir()  # a split of prepared HotpotQA data (its side file) and its published file
    (world / "hotpot" / "valid.hotpot.jsonl").write_text("")
    (world / "hotpot" / "dev.json").write_text("[]")
    _broken_data(world, Path(state["cfg"]["task"]["data"]))
    _hf_folders(world)
    (world / "dangling").symlink_to(world / "gone")  # an output path that is a link to nothing
    (world / "locked").mkdir()  # a folder the user may not write in (condition: locked)
    (world / "prepared").mkdir()  # longformer-prepare-task's --destdir of an earlier run
    (world / "prepared" / "dict.txt").write_text("x 1\n")
    (world / "prepared" / ".written-by-fairseq-longformer").write_text("")
    (world / "busy").mkdir()  # the --save-dir of a training that runs now (the test holds its lock)
    (world / "ro").mkdir()  # on a read-only disk (condition: read_only)
    (world / "evilsave").mkdir()  # a finished run's folder whose checkpoint holds code
    (world / "evilsave" / "model.pt").write_bytes((world / "evil" / "model.pt").read_bytes())
    (world / "evilsave" / "train.log").write_text("".join(
        f"2026-01-01 00:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss {9 - u / 10} | "
        f"bpc {9 - u / 10} | acc 10 | num_updates {u}\n" for u in (1, 2)))


def _hf_folders(world: Path) -> None:
    """Hugging Face folders as a user may hold them: a tiny Longformer MLM (model.safetensors), the
    same as pytorch_model.bin with one flipped bit, truncated, without weights, with a config that
    disagrees with its tensors, is not JSON or names no architecture; a classifier whose labels
    repeat a name."""
    import transformers

    config = transformers.LongformerConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=66, attention_window=[8], pad_token_id=1, bos_token_id=0, eos_token_id=2,
        sep_token_id=2, layer_norm_eps=1e-5)
    torch.manual_seed(0)
    mlm = transformers.LongformerForMaskedLM(config)
    mlm.save_pretrained(world / "hfl")
    torch.save(mlm.state_dict(), world / "pytorch_model.bin")  # what transformers 4 wrote (torch.save's zip)
    flipped_copy(world / "pytorch_model.bin", world / "hf_bin_flipped" / "pytorch_model.bin")
    (world / "hf_bin_flipped" / "config.json").write_bytes((world / "hfl" / "config.json").read_bytes())
    weights = (world / "hfl" / "model.safetensors").read_bytes()
    for name in ("hf_truncated", "hf_noweights", "hf_vocab", "hf_badjson", "hf_noarch"):
        (world / name).mkdir()
        (world / name / "config.json").write_bytes((world / "hfl" / "config.json").read_bytes())
        if name != "hf_noweights":
            (world / name / "model.safetensors").write_bytes(weights[: len(weights) // 2] if name == "hf_truncated"
                                                             else weights)
    stated = json.loads((world / "hfl" / "config.json").read_text())
    (world / "hf_vocab" / "config.json").write_text(json.dumps({**stated, "vocab_size": 60}))
    (world / "hf_badjson" / "config.json").write_text("{not json")
    (world / "hf_noarch" / "config.json").write_text(json.dumps({k: v for k, v in stated.items()
                                                                 if k != "architectures"}))
    labels = {0: "pos", 1: "neg", 2: "pos", 3: "neutral"}
    torch.manual_seed(0)
    transformers.LongformerForSequenceClassification(transformers.LongformerConfig(
        **{**config.to_dict(), "id2label": labels, "label2id": {v: k for k, v in labels.items()}})
    ).save_pretrained(world / "hf_cls_dup")


def _broken_data(world: Path, data: Path) -> None:
    """Data folders as a user may hold them: binarized by fairseq-preprocess (the stock
    checkpoint's ``data``), then a split missing, empty (what fairseq's mmap builder, which
    longformer-preprocess binarizes with, writes for a split of no document: ``--valid-docs 0``),
    truncated, a dictionary that is not the binaries', one that is not the checkpoint's."""
    from fairseq.data import indexed_dataset

    def copy(name, splits=("train", "valid")):
        (world / name).mkdir()
        (world / name / "dict.txt").write_bytes((data / "dict.txt").read_bytes())
        for split in splits:
            for ext in ("bin", "idx"):
                (world / name / f"{split}.{ext}").write_bytes((data / f"{split}.{ext}").read_bytes())
        return world / name

    copy("novalid", ["train"])
    empty = copy("emptyvalid", ["train"])
    indexed_dataset.make_builder(str(empty / "valid.bin"), impl="mmap", vocab_size=100).finalize(str(empty / "valid.idx"))
    cut = copy("cut")
    (cut / "train.bin").write_bytes((data / "train.bin").read_bytes()[:1000])
    small = copy("smalldict")
    (small / "dict.txt").write_text("".join((data / "dict.txt").read_text().splitlines(keepends=True)[:10]))
    swapped = copy("swapped")  # two symbols of the checkpoint's dictionary in the other order
    lines = (data / "dict.txt").read_text().splitlines(keepends=True)
    lines[3], lines[4] = lines[4], lines[3]
    (swapped / "dict.txt").write_text("".join(lines))
    grown = copy("grown")  # the checkpoint's symbols, then one more
    (grown / "dict.txt").write_text((data / "dict.txt").read_text() + "newword 1\n")


def snapshot(world: Path) -> dict:
    """{relative path: sha256 of a file, or 'dir'} of everything under ``world`` (links not followed)."""
    seen = {}
    for root, dirs, files in os.walk(world):
        for name in dirs:
            seen[os.path.relpath(os.path.join(root, name), world)] = "dir"
        for name in files:
            path = os.path.join(root, name)
            seen[os.path.relpath(path, world)] = ("link to " + os.readlink(path) if os.path.islink(path)
                                                  else hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return seen


def tiny_train(*extra: str) -> List[str]:
    return ["data", "--user-dir", PLUGIN, "--task", "masked_lm", "--criterion", "masked_lm", "--arch", "roberta_base",
            "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
            "--encoder-attention-heads", "2", "--tokens-per-sample", "32", "--batch-size", "2", "--optimizer", "adam",
            "--lr", "1e-3", "--cpu", "--max-update", "2", "--no-epoch-checkpoints", "--disable-validation",
            "--num-workers", "0", "--save-dir", "run", *extra]


def train_on(data: str, *extra: str) -> List[str]:
    """``tiny_train`` on another data folder, validating (the valid split is read)."""
    return [data, *(flag for flag in tiny_train(*extra)[1:] if flag != "--disable-validation")]


def hydra_train(world: Path, *overrides: str) -> List[str]:
    """fairseq-hydra-train with the project's base recipe, shrunk; hydra's own run folder apart."""
    return ["--config-dir", str(REPO / "recipes" / "hydra"), "--config-name", "longformer_base",
            f"task.data={world / 'data'}", "checkpoint.finetune_from_model=null", f"checkpoint.save_dir={world / 'run'}",
            f"common.user_dir={PLUGIN}", "common.fp16=false", "common.cpu=true", "optimization.max_update=1",
            "optimization.update_freq=[1]", "dataset.batch_size=2", "dataset.num_workers=0",
            "task.tokens_per_sample=32", "task.pad_to_multiple=16", "model.max_positions=32",
            "model.attention_window=16", "+model.encoder_layers=1", "+model.encoder_embed_dim=32",
            "+model.encoder_ffn_embed_dim=64", "+model.encoder_attention_heads=2",
            f"hydra.run.dir={world.parent / 'hydra'}", "distributed_training.distributed_world_size=1", *overrides]


TRUST = "--trust-checkpoint"
CORRUPT = "copy or download it again"
CASES = [
    Case("longformer-user-dir", "unexpected argument", lambda w: ["extra"], "extra", "no arguments"),
    Case("longformer-gpu-check", "bad --lengths", lambda w: ["gpuout", "--lengths", "4096,abc"], "4096,abc",
         "positive integers"),
    Case("longformer-convert-roberta", "malicious pickle", lambda w: ["--source", "evil", "--output", "out"], "evil/model.pt", TRUST),
    Case("longformer-convert-roberta", "missing", lambda w: ["--source", "nowhere", "--output", "out"], "nowhere", "no such file"),
    Case("longformer-convert-roberta", "empty", lambda w: ["--source", "empty", "--output", "out"], "empty/model.pt", "not a fairseq"),
    Case("longformer-convert-roberta", "truncated", lambda w: ["--source", "truncated", "--output", "out"], "truncated/model.pt", "not a fairseq"),
    Case("longformer-convert-roberta", "wrong kind (text)", lambda w: ["--source", "text", "--output", "out"], "text/model.pt", "not a fairseq"),
    Case("longformer-convert-bart", "malicious pickle", lambda w: ["--source", "evil", "--output", "out"], "evil/model.pt", TRUST),
    Case("longformer-export-hf", "malicious pickle", lambda w: ["evil/model.pt", "out"], "evil/model.pt", TRUST),
    Case("longformer-export-hf", "destination = source", lambda w: ["ckdir/model.pt", "ckdir", "--overwrite"], "ckdir", "another output folder"),
    Case("longformer-export-hf", "empty", lambda w: ["empty/model.pt", "out"], "empty/model.pt", "checkpoint"),
    Case("longformer-export-hf", "wrong kind (text)", lambda w: ["text/model.pt", "out"], "text/model.pt", "checkpoint"),
    Case("longformer-export-hf", "not a dict", lambda w: ["not_a_dict.pt", "out"], "not_a_dict.pt", "checkpoint"),
    Case("longformer-import-hf", "destination = source", lambda w: ["hf", "hf", "--overwrite"], "hf", "another output folder"),
    Case("longformer-import-hf", "missing", lambda w: ["nowhere", "out"], "nowhere", "Hugging Face model folder"),
    Case("longformer-import-hf", "a config.json and no weights", lambda w: ["hf_no_layers", "out"], "hf_no_layers", "model.safetensors"),
    Case("longformer-preprocess-chars", "fake .zip", lambda w: ["fake.zip", "--format", "bytes", "--destdir", "out"], "fake.zip", "pass the uncompressed file"),
    Case("longformer-preprocess-chars", "fake .gz", lambda w: ["fake.gz", "--format", "bytes", "--destdir", "out"], "fake.gz", "pass the uncompressed file"),
    Case("longformer-preprocess-chars", "non-UTF-8", lambda w: ["latin1.txt", "--format", "chars", "--destdir", "out"], "latin1.txt", "--format bytes"),
    Case("longformer-preprocess-chars", "missing", lambda w: ["nowhere.txt", "--format", "chars", "--destdir", "out"], "nowhere.txt", "does not exist"),
    Case("longformer-preprocess-chars", "destination = input's folder", lambda w: ["chars/input.txt", "--format", "chars", "--destdir", "chars", "--overwrite"], "chars", "another output folder"),
    Case("longformer-preprocess", "invalid --sentencepiece-model", lambda w: ["--books", "books", "--sentencepiece-model", "bad.model", "--destdir", "out"], "bad.model", "give the .model file"),
    Case("longformer-preprocess", "non-empty foreign destdir", lambda w: ["--books", "books", "--train-sentencepiece", "40", "--destdir", "foreign"], "foreign", "--overwrite"),
    Case("longformer-preprocess", "destination inside the input", lambda w: ["--books", "books", "--train-sentencepiece", "40", "--destdir", "books/out"], "books", "apart from the inputs"),
    Case("longformer-preprocess", "missing", lambda w: ["--books", "nowhere", "--train-sentencepiece", "40", "--destdir", "out"], "nowhere", "does not exist"),
    Case("longformer-prepare-task", "missing", lambda w: ["classification", "--train", "nowhere.jsonl", "--valid", "nowhere.jsonl", "--train-sentencepiece", "40", "--destdir", "out"], "nowhere.jsonl", "nowhere.jsonl"),
    Case("longformer-prepare-task", "huge line, not JSON", lambda w: ["classification", "--train", "huge_line.txt", "--valid", "huge_line.txt", "--train-sentencepiece", "40", "--destdir", "out"], "huge_line.txt", "JSON"),
    Case("longformer-prepare-task", "non-UTF-8", lambda w: ["classification", "--train", "latin1.txt", "--valid", "latin1.txt", "--train-sentencepiece", "40", "--destdir", "out"], "latin1.txt", "UTF-8"),
    Case("longformer-export-onnx", "missing", lambda w: ["nowhere.pt", "out"], "nowhere.pt", "model.pt"),
    Case("longformer-export-onnx", "malicious pickle", lambda w: ["evil/model.pt", "out"], "evil/model.pt", TRUST),
    Case("longformer-export-onnx", "wrong kind (text)", lambda w: ["text/model.pt", "out"], "text/model.pt", "model.pt"),
    Case("longformer-bench-hf", "--replot missing", lambda w: ["--replot", "nowhere.json"], "nowhere.json", "give the .json"),
    Case("longformer-bench-hf", "--replot not JSON", lambda w: ["--replot", "bench.json"], "bench.json", "give the .json"),
    Case("longformer-coref-score", "missing", lambda w: ["nowhere_conll", "books/a.txt"], "nowhere_conll", "*_conll"),
    Case("longformer-coref-score", "non-UTF-8", lambda w: ["latin1.txt", "latin1.txt"], "latin1.txt", "UTF-8"),
    Case("longformer-coref-score", "wrong kind (text)", lambda w: ["books/a.txt", "books/a.txt"], "books/a.txt", "*_conll"),
    Case("longformer-report", "no --data", lambda w: ["--save-dir", "save"], "--data", "required"),
    Case("longformer-report", "missing --checkpoint", lambda w: ["--data", "data", "--save-dir", "save"], "checkpoint_best.pt", "--checkpoint"),
    Case("longformer-report", "wrong kind of --data", lambda w: ["--data", "books", "--save-dir", "save"], "books", "dataset"),
    Case("longformer-select-paragraphs", "malicious pickle", lambda w: ["--checkpoint", "evil/model.pt", "--data", "hotpot", "--split", "valid=hotpot/dev.json", "--destdir", "out"], "evil/model.pt", TRUST),
    Case("longformer-select-paragraphs", "destination = input's folder", lambda w: ["--checkpoint", "ckdir/model.pt", "--data", "hotpot", "--split", "valid=hotpot/dev.json", "--destdir", "hotpot", "--overwrite"], "hotpot", "another output folder"),
    Case("longformer-bench", "--replot missing", lambda w: ["--replot", "nowhere.json"], "nowhere.json", "give the .json"),
    Case("longformer-bench", "--replot not JSON", lambda w: ["--replot", "bench.json"], "bench.json", "give the .json"),
    Case("longformer-bench", "--replot huge line", lambda w: ["--replot", "huge_line.txt"], "huge_line.txt", "give the .json"),
    Case("longformer-bench", "--replot non-UTF-8", lambda w: ["--replot", "bench_latin1.json"], "bench_latin1.json", "give the .json"),
    Case("longformer-bench-led", "impossible --check-length", lambda w: ["--check-length", "9999", "--window", "8"], "--check-length", "at most"),
    Case("longformer-bench-lm", "bad --batch", lambda w: ["--batch", "0"], "--batch", ">= 1"),
    Case("longformer-bench-mlm", "--dropout 1", lambda w: ["--dropout", "1"], "--dropout", "[0, 1)"),
    Case("longformer-train", "malicious pickle (--restore-file)", lambda w: ["data", *tiny_train("--restore-file", "evil/model.pt")[3:]], "evil/model.pt", TRUST),
    Case("fairseq-train", "malicious pickle (resume)", lambda w: tiny_train("--save-dir", "resume"), "resume/checkpoint_last.pt", TRUST),
    Case("fairseq-train", "empty --restore-file", lambda w: tiny_train("--restore-file", "empty/model.pt"), "empty/model.pt", "intact checkpoint"),
    Case("fairseq-train", "task without its criterion", lambda w: [
        "cls", "--user-dir", PLUGIN, "--task", "longformer_classification", "--criterion", "cross_entropy",
        "--arch", "longformer_base", "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "2", "--attention-window", "8", "--max-positions", "64", "--cpu",
        "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3", "--max-update", "1", "--save-dir", "run"],
         "--criterion cross_entropy", "--criterion longformer_classification"),
    Case("fairseq-eval-lm", "--context-window = --tokens-per-sample", lambda w: [
        "data", "--user-dir", PLUGIN, "--path", "ckdir/model.pt", "--task", "language_modeling", "--tokens-per-sample", "64",
        "--context-window", "64", "--cpu"], "--context-window 64", "--context-window 32"),
    Case("fairseq-generate", "malicious pickle (--path)", lambda w: [
        "data", "--user-dir", PLUGIN, "--path", "evil/model.pt", "--task", "language_modeling", "--cpu"], "evil/model.pt", TRUST),
    Case("longformer-convert-roberta", "flipped bit", lambda w: ["--source", "flipped", "--output", "out"], "flipped/model.pt", CORRUPT),
    Case("longformer-convert-bart", "flipped bit", lambda w: ["--source", "flipped", "--output", "out"], "flipped/model.pt", CORRUPT),
    Case("longformer-export-hf", "flipped bit", lambda w: ["flipped/model.pt", "out"], "flipped/model.pt", CORRUPT),
    Case("fairseq-train", "flipped bit (--restore-file)", lambda w: tiny_train("--restore-file", "flipped/model.pt"), "flipped/model.pt", CORRUPT, in_process=True),
    # issue 40: every failure a user can fix, from what a user has (no --save-dir prepared)
    Case("fairseq-train", "resumed with --weight-decay, saved without", lambda w: tiny_train("--save-dir", "decay", "--weight-decay", "0.01", "--max-update", "4"), "decay/checkpoint_last.pt", "--reset-optimizer", in_process=True),
    Case("fairseq-train", "--save-dir held by a running training", lambda w: tiny_train("--save-dir", "busy"), "busy", "another --save-dir", in_process=True),
    Case("fairseq-train", "--save-dir on a read-only disk", lambda w: tiny_train("--save-dir", "ro/run"), "ro/run", "writable disk", in_process=True, condition=read_only),
    Case("fairseq-train", "disk full while saving", lambda w: tiny_train("--max-update", "1"), "checkpoint", "free space", in_process=True, condition=disk_full),
    Case("fairseq-train", "valid split missing", lambda w: train_on("novalid"), "novalid", "--disable-validation", in_process=True),
    Case("fairseq-train", "valid split empty", lambda w: train_on("emptyvalid"), "emptyvalid", "--disable-validation", in_process=True),
    Case("fairseq-train", "train split truncated", lambda w: train_on("cut"), "cut/train.bin", "binarize the train split again", in_process=True),
    Case("fairseq-train", "dictionary smaller than the binaries' ids", lambda w: train_on("smalldict"), "smalldict/dict.txt", "--srcdict", in_process=True),
    Case("fairseq-train", "dictionary not the --restore-file's", lambda w: train_on("swapped", "--restore-file", "ckdir/model.pt"), "ckdir/dict.txt", "--srcdict ckdir/dict.txt", in_process=True),
    Case("fairseq-train", "dictionary grown, no flag", lambda w: train_on("grown", "--restore-file", "ckdir/model.pt"), "ckdir/dict.txt", "--allow-dictionary-change", in_process=True),
    Case("fairseq-train", "--restore-file of other sizes", lambda w: tiny_train("--restore-file", "ckdir/model.pt", "--encoder-layers", "2"), "--encoder-layers 2 (the checkpoint: 1)", "checkpoint's values", in_process=True),
    Case("fairseq-train", "--finetune-from-model of other sizes", lambda w: tiny_train("--finetune-from-model", "ckdir/model.pt", "--encoder-embed-dim", "64"), "--encoder-embed-dim 64 (the checkpoint: 32)", "checkpoint's values", in_process=True),
    Case("fairseq-train", "--fp16 on CPU", lambda w: tiny_train("--fp16"), "--fp16", "--bf16", in_process=True),
    Case("fairseq-train", "--attention-dropout out of range", lambda w: tiny_train("--attention-dropout", "1.5"), "--attention-dropout 1.5", "[0, 1)", in_process=True),
    Case("fairseq-train", "diverging training (NaN/inf)", lambda w: tiny_train("--lr", "1e30", "--max-update", "20"), "diverged", "lower --lr", in_process=True),
    Case("fairseq-train", "the plugin's own check (--train-mask-prob 1.5)", lambda w: [
        "data", "--user-dir", PLUGIN, "--arch", "longformer_base", "--task", "longformer_mlm", "--criterion", "longformer_mlm",
        "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
        "--attention-window", "8", "--pad-to-multiple", "8", "--tokens-per-sample", "32", "--max-positions", "32",
        "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3", "--cpu", "--max-update", "1", "--disable-validation",
        "--num-workers", "0", "--save-dir", "run", "--train-mask-prob", "1.5"], "--train-mask-prob", "(0, 1)", in_process=True),
    Case("fairseq-hydra-train", "attention_dropout out of range", lambda w: hydra_train(w, "model.attention_dropout=1.5"), "--attention-dropout 1.5", "[0, 1)"),
    Case("longformer-report", "checkpoint holds code (no bpc.png)", lambda w: ["--data", "data", "--save-dir", "evilsave", "--checkpoint", "model.pt"], "evilsave/model.pt", TRUST),
    # issue 49: what a new user still met
    Case("longformer-export-onnx", "HF folder: flipped bit in pytorch_model.bin", lambda w: ["hf_bin_flipped", "out"], "hf_bin_flipped/pytorch_model.bin", CORRUPT),
    Case("longformer-export-onnx", "HF folder: truncated model.safetensors", lambda w: ["hf_truncated", "out"], "hf_truncated", "download the folder again"),
    Case("longformer-export-onnx", "HF folder: no weights", lambda w: ["hf_noweights", "out"], "hf_noweights", "model.safetensors"),
    Case("longformer-export-onnx", "HF folder: vocab_size not the tensors'", lambda w: ["hf_vocab", "out"], "vocab_size = 60", "download the folder again"),
    Case("longformer-export-onnx", "HF folder: config.json not JSON", lambda w: ["hf_badjson", "out"], "hf_badjson/config.json", "Download the folder again"),
    Case("longformer-export-onnx", "HF folder: config.json without architectures", lambda w: ["hf_noarch", "out"], "hf_noarch/config.json", '"architectures"'),
    Case("longformer-export-onnx", "--opset 7 (too old), output in new folders", lambda w: ["hfl", "new/sub/out", "--opset", "7"], "--opset 7", "--opset 18"),
    Case("longformer-export-onnx", "--opset 99 (too new), output in new folders", lambda w: ["hfl", "new/sub/out", "--opset", "99"], "--opset 99", "--opset 18"),
    Case("longformer-export-onnx", "output a dangling symlink", lambda w: ["hfl", "dangling"], "dangling", "symbolic link"),
    Case("longformer-export-onnx", "--dynamo without onnxscript", lambda w: ["hfl", "out", "--dynamo"], "--dynamo", "pip install onnxscript"),
    Case("longformer-export-onnx", "output in a folder not writable", lambda w: ["hfl", "locked/out"], "locked/out", "write to", condition=locked),
    Case("longformer-export-onnx", "disk full while writing", lambda w: ["hfl", "out"], "out", "free space", condition=onnx_disk_full),
    Case("longformer-import-hf", "id2label repeats a name", lambda w: ["hf_cls_dup", "out"], "'pos'", "id2label"),
    Case("longformer-import-hf", "output in a folder not writable", lambda w: ["hfl", "locked/out"], "locked/out", "write to", condition=locked),
    Case("longformer-import-hf", "disk full while saving", lambda w: ["hfl", "out"], "out", "free space", condition=disk_full),
    Case("longformer-import-hf", "output a dangling symlink", lambda w: ["hfl", "dangling"], "dangling", "symbolic link"),
    Case("longformer-prepare-task", "second run, same --destdir", lambda w: ["classification", "--train", "kjv/classification.train.jsonl", "--valid", "kjv/classification.valid.jsonl", "--train-sentencepiece", "40", "--destdir", "prepared"], "prepared", "--overwrite"),
    Case("longformer-prepare-task", "--destdir in a folder not writable", lambda w: ["classification", "--train", "kjv/classification.train.jsonl", "--valid", "kjv/classification.valid.jsonl", "--train-sentencepiece", "40", "--destdir", "locked/out"], "locked/out", "write to", condition=locked),
    Case("longformer-select-paragraphs", "--threshold nan", lambda w: ["--checkpoint", "ckdir/model.pt", "--data", "hotpot", "--split", "valid=hotpot/dev.json", "--destdir", "out", "--threshold", "nan"], "--threshold nan", "finite"),
    Case("longformer-select-paragraphs", "--threshold -inf", lambda w: ["--checkpoint", "ckdir/model.pt", "--data", "hotpot", "--split", "valid=hotpot/dev.json", "--destdir", "out", "--threshold=-inf"], "--threshold -inf", "finite"),
    Case("longformer-select-paragraphs", "--split name is a path", lambda w: ["--checkpoint", "ckdir/model.pt", "--data", "hotpot", "--split", "../x/valid=hotpot/dev.json", "--destdir", "out"], "../x/valid", "--split valid="),
    Case("longformer-select-paragraphs", "--destdir in a folder not writable", lambda w: ["--checkpoint", "ckdir/model.pt", "--data", "hotpot", "--split", "valid=hotpot/dev.json", "--destdir", "locked/out"], "locked/out", "write to", condition=locked),
    Case("fairseq-train", "torchrun 2 processes, no --distributed-world-size", lambda w: tiny_train(), "WORLD_SIZE=2", "--distributed-world-size 2", in_process=True, condition=torchrun),
]


def console_scripts() -> dict:
    text = (REPO / "setup.py").read_text()
    return dict(re.findall(r'"([\w-]+) = ([\w.]+:\w+)"', text))


def run_in_process(target: str, argv: List[str]) -> Tuple[int, str]:
    """Call a console script's main(argv) as its entry point would; (exit code, stderr)."""
    module, function = target.split(":")
    main = getattr(__import__(module, fromlist=[function]), function)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
            if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
                print(code, file=sys.stderr)
                code = 1
        except Exception:  # a traceback: what the table must never see
            traceback.print_exc()
            code = 1
    return code or 0, err.getvalue()


def run_subprocess(command: str, argv: List[str], cwd: Path) -> Tuple[int, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    result = subprocess.run([str(BIN / command), *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)
    return result.returncode, result.stderr


@pytest.fixture(scope="module")
def world(stock_roberta, classification_data, kjv_jsonl, tmp_path_factory) -> Path:  # noqa: F811
    from longformer_common.atomic import hold_folder

    folder = tmp_path_factory.mktemp("world")
    _world_files(folder, stock_roberta, classification_data)
    (folder / "kjv").symlink_to(kjv_jsonl)
    busy = hold_folder(folder / "busy")  # a training in another process holds it so
    yield folder
    os.close(busy)


def test_every_console_script_is_in_the_table():
    assert set(console_scripts()) <= {case.command for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.command}:{c.bad_input}" for c in CASES])
def test_bad_input(case: Case, world: Path, monkeypatch, request):
    STARTED.append((case.command, case.bad_input))
    monkeypatch.chdir(world)
    before = snapshot(world)
    scripts = console_scripts()
    if case.condition is not None:
        case.condition(monkeypatch, world)
    if case.in_process:
        code, stderr = run_fairseq_in_process(case.command, case.argv(world))
    elif case.command in scripts and case.command != "longformer-train":
        code, stderr = run_in_process(scripts[case.command], case.argv(world))
    else:  # fairseq's CLIs (and the wrapper around fairseq-train) parse sys.argv
        code, stderr = run_subprocess(case.command, case.argv(world), world)
    lines = [line for line in stderr.splitlines() if line.strip() and line != HYDRA_FOOTER]
    last = lines[-1] if lines else ""
    problems = []
    if code == 0:
        problems.append("exit 0")
    if "Traceback" in stderr:
        problems.append("traceback")
    if case.names not in last or case.fix not in last:
        problems.append(f"last line does not name {case.names!r} and {case.fix!r}")
    if (world / "RAN").exists():
        problems.append("the pickle's code ran")
    monkeypatch.undo()  # the simulated disk is gone before the world is compared
    if snapshot(world) != before:
        changed = set(snapshot(world).items()) ^ set(before.items())
        problems.append(f"files changed: {sorted({path for path, _ in changed})[:5]}")
    outcome = f"exit {code}: {last[:150]}" if not problems else "FAIL: " + "; ".join(problems)
    OUTCOMES.append((case.command, case.bad_input, outcome))
    assert not problems, f"{'; '.join(problems)}\n{stderr[-3000:]}"


def test_print_table(capsys):
    """The table of every case this process ran (pytest-xdist shares the cases out among its
    workers); each case that started recorded exactly one outcome (a case whose run never got to
    its checks is reported here), and every outcome is a non-zero exit."""
    with capsys.disabled():
        print(f"\n{'command':30s} | {'bad input':40s} | outcome")
        for command, bad_input, outcome in OUTCOMES:
            print(f"{command:30s} | {bad_input:40s} | {outcome}")
    names = [(case.command, case.bad_input) for case in CASES]
    assert len(set(names)) == len(names), "two cases share a command and bad input: the table cannot tell them apart"
    recorded = [(command, bad_input) for command, bad_input, _ in OUTCOMES]
    assert sorted(recorded) == sorted(STARTED), f"cases without an outcome: {sorted(set(STARTED) - set(recorded))}"
    assert all(outcome.startswith("exit ") and not outcome.startswith("exit 0") for *_, outcome in OUTCOMES)
