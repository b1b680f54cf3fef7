"""A checkpoint_last.pt that is truncated, empty or not a checkpoint does not strand a user: the
same command resumes from the newest intact checkpoint in the folder, with a warning naming the
bad file; with no intact checkpoint it stops with an error naming the folder, writing nothing."""
import shutil
import subprocess

import pytest
import torch

from fairseq_longformer.runtime.resume import is_intact_checkpoint
from tests.support.training import FAIRSEQ_TRAIN, run_logged, subprocess_env, tiny_train_cmd

CORRUPTIONS = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[:5000]),
    "empty": lambda path: path.write_bytes(b""),
    "foreign": lambda path: path.write_text("not a checkpoint\n"),
}


@pytest.fixture(scope="module")
def trained(kjv_data_bin, tmp_path_factory):
    """A run of 2 updates saving every update: checkpoint_1_1, checkpoint_1_2, _best, _last."""
    folder = tmp_path_factory.mktemp("resume")
    run_logged([FAIRSEQ_TRAIN, *tiny_train_cmd(kjv_data_bin, folder / "ckpt", 2, "--save-interval-updates", "1")],
               folder / "first.log", timeout=300)
    return kjv_data_bin, folder / "ckpt"


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_resumes_from_newest_intact_checkpoint(trained, tmp_path, corruption):
    data, original = trained
    save_dir = tmp_path / "ckpt"
    shutil.copytree(original, save_dir)
    last = save_dir / "checkpoint_last.pt"
    CORRUPTIONS[corruption](last)
    assert not is_intact_checkpoint(str(last))
    text = run_logged([FAIRSEQ_TRAIN, *tiny_train_cmd(data, save_dir, 3, "--save-interval-updates", "1")],
                      tmp_path / "resume.log", timeout=300)
    assert f"{last} is not a complete checkpoint" in text
    assert "@ 2 updates)" in text  # resumed at the update of the newest intact checkpoint
    assert "num_updates=3" in text
    state = torch.load(last, map_location="cpu", weights_only=False)  # rewritten whole
    assert state["optimizer_history"][-1]["num_updates"] == 3


def test_no_intact_checkpoint_is_a_clear_error_and_writes_nothing(trained, tmp_path):
    data, original = trained
    save_dir = tmp_path / "ckpt"
    save_dir.mkdir()
    last = save_dir / "checkpoint_last.pt"
    last.write_bytes((original / "checkpoint_last.pt").read_bytes()[:5000])
    before = last.read_bytes()
    result = subprocess.run([FAIRSEQ_TRAIN, *map(str, tiny_train_cmd(data, save_dir, 3))], capture_output=True,
                            text=True, env=subprocess_env(), timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr  # one line (it was a RuntimeError's traceback)
    assert f"no other intact checkpoint*.pt is in {save_dir}" in result.stderr.strip().splitlines()[-1]
    assert "--restore-file" in result.stderr
    assert sorted(p.name for p in save_dir.iterdir()) == ["checkpoint_last.pt"] and last.read_bytes() == before


def test_intact_check_reads_real_checkpoints(trained):
    _, original = trained
    assert all(is_intact_checkpoint(str(path)) for path in original.glob("checkpoint*.pt"))


def test_training_output_has_no_unactionable_noise(trained):
    """No "Please install tensorboardX", no hydra / pin_memory / autocast warnings (runtime/shims.py)."""
    _, original = trained
    log = (original.parent / "first.log").read_text()
    assert "num_updates=2" in log
    for noise in ("tensorboardX", "UserWarning", "FutureWarning", "DeprecationWarning"):
        assert noise not in log, noise
