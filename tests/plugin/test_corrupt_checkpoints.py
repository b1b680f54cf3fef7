"""A checkpoint with one flipped bit is refused wherever a checkpoint is read: the converters,
longformer-export-hf, longformer-import-hf (pytorch_model.bin), --restore-file under any name,
--finetune-from-model, longformer-report's fill-mask, and resuming. Each ends in one line naming
the file and the fix, and writes nothing (no output folder, no checkpoint, no bpc.png).

The flipped bit sits inside a tensor's stored bytes, the zip directory intact: torch's own
reader loads such a file without complaint (checked below), so without the CRC check every
command carried the corruption on under a fresh, valid CRC. One tiny fixture (a fairseq 0.12
RoBERTa and BART as fairseq-train writes them, tests/support/published_checkpoints.py) serves
every path; the commands run in-process.
"""
import shutil
import sys
from pathlib import Path

import pytest
import torch

import fairseq_longformer  # noqa: F401  (applies the patches)
from fairseq_longformer import UserInputError
from longformer_common.atomic import MARKER
from fairseq_longformer.cli import convert_roberta, export_hf, train
from fairseq_longformer.runtime.resume import is_intact_checkpoint
from fairseq_longformer.conversion.fairseq_sources import convert_roberta_checkpoint
from tests.integration.test_bad_inputs import run_in_process
from tests.support.corrupt import flipped_copy
from tests.support.published_checkpoints import POSITIONS, TINY, bart_args, built_model_state, roberta_args, save_0_12

FIX = "copy or download it again"


@pytest.fixture(scope="module")
def world(kjv_data_bin, tmp_path_factory):
    """Flipped copies of a RoBERTa, a BART, a converted Longformer and its HF export (as
    pytorch_model.bin), each beside what its command needs; and the intact Longformer."""
    root = tmp_path_factory.mktemp("corrupt")
    roberta, bart = roberta_args(kjv_data_bin), bart_args(kjv_data_bin)
    sources = {"roberta": save_0_12(root / "roberta" / "model.pt", roberta, built_model_state(roberta), "MaskedLmLoss",
                                    plain=True),
               "bart": save_0_12(root / "bart" / "model.pt", bart, built_model_state(bart), "CrossEntropyCriterion",
                                 plain=True)}
    for path in sources.values():
        shutil.copy(kjv_data_bin / "dict.txt", path.parent / "dict.txt")
    convert_roberta_checkpoint(root / "roberta", root / "longformer", max_positions=2 * POSITIONS, attention_window="8")
    assert export_hf.main([str(root / "longformer" / "model.pt"), str(root / "hf")]) == 0
    from safetensors.torch import load_file

    hf = root / "flipped" / "hf"
    shutil.copytree(root / "hf", hf)
    (hf / "model.safetensors").unlink()
    (hf / MARKER).unlink()
    torch.save(load_file(str(root / "hf" / "model.safetensors")), root / "pytorch_model.bin")
    flipped_copy(root / "pytorch_model.bin", hf / "pytorch_model.bin")
    for name, source in (*sources.items(), ("longformer", root / "longformer" / "model.pt")):
        flipped_copy(source, root / "flipped" / name / "model.pt")
        shutil.copy(source.parent / "dict.txt", root / "flipped" / name / "dict.txt")
    shutil.copy(root / "flipped" / "roberta" / "model.pt", root / "flipped" / "pretrained.weights")  # any name
    save = root / "flipped" / "report_save"  # a finished run: its log and a flipped checkpoint_best.pt
    save.mkdir()
    (save / "train.log").write_text("2026-01-01 00:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | "
                                    "loss 9.9 | bpc 9.9 | num_updates 1\n")
    shutil.copy(root / "flipped" / "longformer" / "model.pt", save / "checkpoint_best.pt")
    return root


def test_torch_itself_loads_the_flipped_copy(world):
    """What the check is for: the flipped file loads, one weight silently different."""
    intact = torch.load(world / "longformer" / "model.pt", map_location="cpu", weights_only=False)["model"]
    flipped = torch.load(world / "flipped" / "longformer" / "model.pt", map_location="cpu", weights_only=False)["model"]
    changed = [key for key in intact if not torch.equal(intact[key], flipped[key])]  # a tied weight: 2 names
    assert changed and all((intact[key] != flipped[key]).sum() == 1 for key in changed)
    assert is_intact_checkpoint(str(world / "longformer" / "model.pt"))
    assert not is_intact_checkpoint(str(world / "flipped" / "longformer" / "model.pt"))  # resume skips it


def tiny_train(data, *extra):
    return [str(data), "--task", "masked_lm", "--criterion", "masked_lm", "--arch", "roberta_base", *TINY,
            "--max-positions", str(POSITIONS), "--tokens-per-sample", str(POSITIONS), "--optimizer", "adam",
            "--lr", "1e-4", "--batch-size", "2", "--max-update", "1", "--cpu", "--num-workers", "0",
            "--disable-validation", *extra]


CLI = "fairseq_longformer.cli."
# path -> (console script's main, argv given the world, the data and the output, the flipped file named)
PATHS = {
    "longformer-convert-roberta": (CLI + "convert_roberta:main",
                                   lambda w, d, out: ["--source", str(w / "flipped/roberta"), "--output", str(out)],
                                   "roberta/model.pt"),
    "longformer-convert-bart": (CLI + "convert_bart:main",
                                lambda w, d, out: ["--source", str(w / "flipped/bart"), "--output", str(out)],
                                "bart/model.pt"),
    "longformer-export-hf": (CLI + "export_hf:main", lambda w, d, out: [str(w / "flipped/longformer/model.pt"), str(out)],
                             "longformer/model.pt"),
    "longformer-import-hf": (CLI + "import_hf:main", lambda w, d, out: [str(w / "flipped/hf"), str(out)],
                             "hf/pytorch_model.bin"),
    "--restore-file": (f"{__name__}:train_as_cli", lambda w, d, out: tiny_train(
        d, "--restore-file", str(w / "flipped/pretrained.weights"), "--save-dir", str(out)), "pretrained.weights"),
    "--finetune-from-model": (f"{__name__}:train_as_cli", lambda w, d, out: tiny_train(
        d, "--finetune-from-model", str(w / "flipped/roberta/model.pt"), "--save-dir", str(out)), "roberta/model.pt"),
    "longformer-report": ("longformer_tools.cli.report:main", lambda w, d, out: [
        "--data", str(d), "--save-dir", str(w / "flipped/report_save"), "--fill-mask", "1"],
        "report_save/checkpoint_best.pt"),
}


def train_as_cli(argv):
    """longformer-train in-process, ending as its console script does: a UserInputError is one
    line (the plugin's excepthook, installed when fairseq parses the arguments)."""
    try:
        return train.main(argv)
    except UserInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def files(folder: Path):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", list(PATHS))
def test_a_flipped_bit_is_refused_in_one_line_and_nothing_is_written(path, world, kjv_data_bin, tmp_path, monkeypatch):
    target, argv, named = PATHS[path]
    monkeypatch.setattr(sys, "argv", sys.argv[:])  # longformer-train sets it
    before = files(world)
    code, stderr = run_in_process(target, argv(world, kjv_data_bin, tmp_path / "out"))
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    assert code not in (0, None) and "Traceback" not in stderr, stderr[-2000:]
    assert named in last and "corrupt" in last and "CRC-32" in last and FIX in last, last
    assert files(world) == before and files(tmp_path) == []  # no output, no checkpoint, no bpc.png


def test_the_converters_overwrite_only_their_own_model_pt(world, capsys):
    """--overwrite replaces a model.pt the converters wrote (their marker beside it), never one
    that was there before (a user's own checkpoint folder)."""
    source = world / "roberta"
    argv = ["--source", str(source), "--max-positions", str(2 * POSITIONS), "--attention-window", "8", "--overwrite"]
    foreign = world / "users_folder"
    foreign.mkdir()
    (foreign / "model.pt").write_bytes(b"the user's own checkpoint")
    assert convert_roberta.main(argv + ["--output", str(foreign)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(foreign) in err and MARKER in err and "choose another folder" in err
    assert files(foreign) == ["model.pt"] and (foreign / "model.pt").read_bytes() == b"the user's own checkpoint"

    ours = world / "longformer"  # written by the converter above: its marker is there
    assert (ours / MARKER).is_file()
    before = (ours / "model.pt").read_bytes()
    assert convert_roberta.main(argv + ["--output", str(ours), "--init-positions", "random"]) == 0
    assert (ours / "model.pt").read_bytes() != before
