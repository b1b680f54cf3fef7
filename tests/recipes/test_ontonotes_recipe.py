"""recipes/finetune_ontonotes.sh (DRY_RUN=1): the paper's settings reach fairseq-train's command
line (encoder 1e-5, head x10, whole documents at 4,096, one document per update, 20 epochs with
10% warmup), the RoBERTa baseline's segments by SEGMENT_LENGTH, and the CPU smoke settings."""
import json
import os
import shlex
import subprocess

from tests.conftest import REPO


def command(data, **env):
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune_ontonotes.sh")], capture_output=True, text=True,
                          env={**os.environ, "DRY_RUN": "1", "DATA": str(data), **env}, check=True)
    summary, line = done.stdout.strip().splitlines()[-2:]
    argv = shlex.split(line)
    return summary, {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}, argv


def test_paper_settings_and_baseline_segments(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps({"splits": {"train": {"examples": 2802}}}))
    summary, flags, argv = command(tmp_path)
    assert "2802 train examples, 1 per update, 20 epochs = 56040 updates (5604 warmup)" in summary
    assert (flags["--task"], flags["--criterion"], flags["--arch"]) == ("longformer_coref",) * 2 + ("longformer_base",)
    assert (flags["--lr"], flags["--head-lr-multiplier"], flags["--segment-length"]) == ("1e-5", "10", "0")
    assert (flags["--max-positions"], flags["--batch-size"], flags["--coref-dropout"]) == ("4096", "1", "0.3")
    assert (flags["--dropout"], flags["--attention-dropout"]) == ("0.1", "0.1")  # BERT's, as the original's
    assert flags["--best-checkpoint-metric"] == "conll_f1" and "--fp16" in argv and "--fp16-no-flatten-grads" in argv
    _, flags, argv = command(tmp_path, SEGMENT_LENGTH="384", CPU="1", WRITE_CONLL=str(tmp_path / "out"))
    assert flags["--segment-length"] == "384" and flags["--write-conll"] == str(tmp_path / "out")
    assert "--cpu" in argv and "--fp16" not in argv and flags["--max-update"] == "2"
