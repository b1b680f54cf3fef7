"""recipes/finetune.sh (DRY_RUN=1): the paper's defaults, the update arithmetic from stats.json,
the restore flag and the ablation switches reach fairseq-train's command line."""
import os
import shlex
import subprocess

from tests.conftest import REPO


def _command(data, task, **env):
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune.sh"), task, "--max-update", "7"],
                          env={**os.environ, "DRY_RUN": "1", "DATA": str(data), **env},
                          capture_output=True, text=True, check=True)
    summary, command = done.stdout.strip().splitlines()[-2:]
    return summary, shlex.split(command)


def _flag(argv, name):
    return argv[len(argv) - 1 - argv[::-1].index(name) + 1]


def test_classification_defaults(classification_data):
    summary, argv = _command(classification_data, "classification")
    # 48 train documents, batch 32, 15 epochs: 2 x 15 updates, 10% warmup
    assert "48 train examples, 32 per update, 15 epochs = 30 updates (3 warmup)" in summary
    assert (_flag(argv, "--lr"), _flag(argv, "--total-num-update"), _flag(argv, "--warmup-updates")) == ("3e-5", "30", "3")
    assert _flag(argv, "--task") == "longformer_classification" and _flag(argv, "--global-attention") == "task"
    assert _flag(argv, "--max-positions") == "4096" and _flag(argv, "--attention-window") == "256"
    assert (_flag(argv, "--dropout"), _flag(argv, "--attention-dropout")) == ("0.1", "0.1")  # RoBERTa's (appendix D)
    assert argv[-2:] == ["--max-update", "7"]  # extra flags come last
    assert "--finetune-from-model" not in argv and "--no-global-projections" not in argv


def test_qa_restore_and_ablation_switches(qa_data, tmp_path):
    summary, argv = _command(qa_data, "qa", RESTORE=str(tmp_path / "model.pt"), GLOBAL_ATTENTION="none",
                             NO_GLOBAL_PROJECTIONS="1", DOC_STRIDE="512")
    assert "5 epochs = 10 updates" in summary
    assert _flag(argv, "--finetune-from-model") == str(tmp_path / "model.pt")
    assert _flag(argv, "--global-attention") == "none" and "--no-global-projections" in argv
    assert _flag(argv, "--doc-stride") == "512" and _flag(argv, "--criterion") == "longformer_qa"
