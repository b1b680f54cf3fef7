"""The per-dataset recipes (DRY_RUN=1): the paper's settings reach fairseq-train's command line on
a GPU (fp16), and CPU=1 turns them into a smoke run (HotpotQA's run for real on the tiny sample)."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)


def _command(tmp_path, recipe, examples=640, **env):
    (tmp_path / "stats.json").write_text(json.dumps({"splits": {"train": {"examples": examples}}}))
    done = subprocess.run(["bash", str(REPO / "recipes" / recipe)],
                          env={**os.environ, "DRY_RUN": "1", "DATA": str(tmp_path), "LED": "led", **env},
                          capture_output=True, text=True, check=True)
    summary, command = done.stdout.strip().splitlines()[-2:]
    return summary, shlex.split(command)


def _flag(argv, name):
    return argv[len(argv) - 1 - argv[::-1].index(name) + 1]


@pytest.mark.parametrize("recipe", ["finetune_imdb.sh", "finetune_hyperpartisan.sh"])
def test_classification_recipes(recipe, tmp_path):
    summary, argv = _command(tmp_path, recipe)
    assert "640 train examples, 32 per update, 15 epochs = 300 updates (30 warmup)" in summary
    assert _flag(argv, "--task") == "longformer_classification" and _flag(argv, "--lr") == "3e-5"
    assert "--fp16" in argv and "--cpu" not in argv
    _, smoke = _command(tmp_path, recipe, CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke
    assert (_flag(smoke, "--max-update"), _flag(smoke, "--batch-size")) == ("2", "2")


def test_triviaqa_recipe(tmp_path):
    summary, argv = _command(tmp_path, "finetune_triviaqa.sh")
    assert "640 train examples, 32 per update, 5 epochs = 100 updates" in summary
    assert _flag(argv, "--task") == "longformer_qa" and _flag(argv, "--warmup-updates") == "1000"
    assert _flag(argv, "--max-positions") == "4096" and "--fp16" in argv


def test_led_arxiv_recipe(tmp_path):
    summary, argv = _command(tmp_path, "led_arxiv.sh")
    assert "640 train documents, 16 per update, 5 epochs = 200 updates (20 warmup)" in summary
    assert (_flag(argv, "--max-source-positions"), _flag(argv, "--attention-window")) == ("16384", "512")
    assert _flag(argv, "--restore-file") == "led/model.pt" and _flag(argv, "--arch") == "led_large"
    assert "--fp16" in argv and "--checkpoint-activations" in argv
    _, smoke = _command(tmp_path, "led_arxiv.sh", CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke and _flag(smoke, "--max-update") == "2"


def test_hotpotqa_recipe(tmp_path):
    summary, argv = _command(tmp_path, "finetune_hotpotqa.sh")
    assert "640 train examples, 32 per update, 5 epochs = 100 updates" in summary
    assert _flag(argv, "--task") == _flag(argv, "--criterion") == "longformer_hotpotqa"
    assert (_flag(argv, "--lr"), _flag(argv, "--warmup-updates")) == ("5e-5", "1000")
    assert _flag(argv, "--best-checkpoint-metric") == "joint_f1" and _flag(argv, "--max-positions") == "4096"
    assert "--fp16" in argv and "--cpu" not in argv
    _, smoke = _command(tmp_path, "finetune_hotpotqa.sh", CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke and _flag(smoke, "--max-update") == "2"


def test_hotpotqa_recipe_smoke_run_on_cpu(hotpotqa_data, tmp_path):  # noqa: F811
    tiny = "--encoder-layers 2 --encoder-embed-dim 64 --encoder-ffn-embed-dim 128 --encoder-attention-heads 4"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the recipe calls fairseq-train
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": path, "CPU": "1", "DATA": str(hotpotqa_data),
           "MAX_POSITIONS": "128", "ATTENTION_WINDOW": "8", "MODEL_ARGS": tiny, "SAVE_DIR": str(tmp_path / "save")}
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune_hotpotqa.sh"), "--batch-size", "4"], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    valid = [line for line in (done.stdout + done.stderr).splitlines() if "valid on 'valid' subset" in line]
    assert valid and all(f"| {name} " in valid[-1] for name in ("em", "sp_f1", "joint_f1")), valid
    assert (tmp_path / "save" / "checkpoint_best.pt").is_file()
