"""recipes/charlm_{text8,enwik8}.sh with DRY_RUN=1: the paper's 5-phase table in the printed
commands, every phase's flags accepted by fairseq's own parser, and clear errors."""
import os
import shlex
import subprocess

import pytest
from fairseq import options

from tests.conftest import REPO


def _dry_run(script, tmp_path, **env):
    full = {**os.environ, "DRY_RUN": "1", "DATA": str(tmp_path / "data-bin"), "RAW": "text8.zip",
            "SAVE_DIR": str(tmp_path / "ckpt"), **env}
    return subprocess.run(["bash", str(REPO / "recipes" / script)], capture_output=True, text=True,
                          env=full, cwd=tmp_path, timeout=120)


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


def test_text8_dry_run_prints_the_papers_five_phases(tmp_path):
    result = _dry_run("charlm_text8.sh", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [shlex.split(line) for line in result.stdout.splitlines() if line and not line.startswith("#")]
    prepare, *train, evaluate = lines
    assert prepare[:3] == ["longformer-preprocess-chars", "--format", "text8"]
    assert len(train) == 5 and all(cmd[0] == "fairseq-train" for cmd in train)
    assert [int(_flag(c, "--tokens-per-sample")) for c in train] == [2048, 4096, 8192, 16384, 23040]
    assert [float(_flag(c, "--lr")) for c in train] == [2.5e-4 / 2 ** i for i in range(5)]
    # 32/32/16/16/16 sequences per update: 1 per GPU x 1 GPU x update-freq
    assert [int(_flag(c, "--update-freq")) for c in train] == [32, 32, 16, 16, 16]
    assert {_flag(c, "--batch-size") for c in train} == {"1"}
    # warmup 10% of the phase, at most 10K; a constant rate after it
    assert [int(_flag(c, "--warmup-updates")) for c in train] == [10000, 5000, 5000, 3500, 500]
    assert {_flag(c, "--lr-scheduler") for c in train} == {"fixed"}
    assert {(_flag(c, "--weight-decay"), _flag(c, "--clip-norm")) for c in train} == {("0.01", "0.25")}
    for phase, cmd in enumerate(train):
        windows = [int(w) for w in _flag(cmd, "--attention-window").split(",")]
        length = int(_flag(cmd, "--tokens-per-sample"))
        assert len(windows) == 12 and windows[0] == 32 << phase and windows == sorted(windows)
        assert max(windows) == length  # the top layers' 8,192 << phase, capped at the sequence
        if phase:
            assert _flag(cmd, "--finetune-from-model") == str(tmp_path / "ckpt" / f"phase{phase}" / "checkpoint_last.pt")
        else:
            assert "--finetune-from-model" not in cmd
    # the paper's positions (relative) in every phase, and its evaluation at 32,256, beyond 23,040
    assert all("--relative-positions" in c and "--max-target-positions" not in c for c in train)
    assert evaluate[0] == "fairseq-eval-lm"
    assert (_flag(evaluate, "--tokens-per-sample"), _flag(evaluate, "--context-window")) == ("32256", "31744")
    # every phase's flags are fairseq-train's (its own parser, our plugin loaded)
    for cmd in (train[0], train[-1]):
        args = options.parse_args_and_arch(options.get_training_parser(), cmd[1:])
        assert args.arch == "longformer_lm_small" and args.decoder_layers == 12 and args.dropout == 0.2
        assert args.relative_positions


def test_learned_positions_stay_an_option(tmp_path):
    result = _dry_run("charlm_text8.sh", tmp_path, POSITIONS="learned")
    assert result.returncode == 0, result.stderr
    lines = [shlex.split(line) for line in result.stdout.splitlines() if line and not line.startswith("#")]
    *_, train, evaluate = lines
    assert "--relative-positions" not in train and _flag(train, "--max-target-positions") == "23040"
    assert (_flag(evaluate, "--tokens-per-sample"), _flag(evaluate, "--context-window")) == ("23040", "22528")


def test_large_model_steps_and_bad_settings(tmp_path):
    result = _dry_run("charlm_enwik8.sh", tmp_path, MODEL="large", RAW="enwik8.zip")
    assert result.returncode == 0, result.stderr
    train = [shlex.split(line) for line in result.stdout.splitlines() if line.startswith("fairseq-train")]
    assert [int(_flag(c, "--max-update")) for c in train] == [350000, 25000, 10000, 5000, 5000]
    assert {_flag(c, "--arch") for c in train} == {"longformer_lm_large"}
    for env, message in [(dict(BATCH_PER_GPU="3"), "not divisible by BATCH_PER_GPU x NGPUS = 3"),
                         (dict(MODEL="medium"), "must be small or large"),
                         (dict(STEPS="1 2"), "one value per phase"),
                         (dict(POSITIONS="sinusoidal"), "must be relative or learned"),
                         (dict(POSITIONS="learned", EVAL_TOKENS="32256"), "exceeds the model's MAX_POSITIONS=23040")]:
        result = _dry_run("charlm_text8.sh", tmp_path, **env)
        assert result.returncode != 0 and message in result.stderr, (env, result.stderr)
