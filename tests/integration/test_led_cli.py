"""The LED through fairseq's own command lines, with the flags longformer-convert-bart prints:
``fairseq-train --task translation --restore-file`` (document -> summary fine-tuning), then
``fairseq-generate`` (beam search) on the fine-tuned checkpoint, sources truncated by the task."""
import re
from pathlib import Path

from fairseq_longformer.conversion.fairseq_sources import convert_bart_checkpoint

from tests.conftest import REPO
from tests.support.led_models import BIN, LANGS, LED_POSITIONS, load, run

TRUNCATE_TO = 16  # tokens; the test sources have up to 31


def test_fairseq_train_then_generate(bart_dir, led_data_bin, tmp_path):
    result = convert_bart_checkpoint(bart_dir, tmp_path / "led", max_positions=LED_POSITIONS, attention_window="4")
    save = tmp_path / "save"
    log = run([BIN / "fairseq-train", led_data_bin, "--user-dir", REPO / "fairseq_longformer", *result.train_flags(),
               *LANGS, "--batch-size", "16", "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "fixed",
               "--max-update", "2", "--cpu", "--num-workers", "0", "--no-epoch-checkpoints", "--save-dir", save,
               "--log-format", "simple"], tmp_path / "train.log")
    assert f"LED encoder: {LED_POSITIONS} positions, one-sided window(s) 4,4" in log
    assert f"Loaded checkpoint {result.checkpoint} (epoch 1 @ 0 updates)" in log
    trained = load(save / "checkpoint_last.pt")
    assert trained["cfg"]["model"].arch == "led_base" and trained["optimizer_history"][-1]["num_updates"] == 2

    flags = [flag if flag != str(result.checkpoint) else str(save / "checkpoint_last.pt")
             for flag in result.generate_flags()]
    # the task's --max-source-positions below the encoder's, with --truncate-source: sources cut
    out = run([BIN / "fairseq-generate", led_data_bin, "--user-dir", REPO / "fairseq_longformer", *flags, *LANGS,
               "--max-source-positions", str(TRUNCATE_TO), "--truncate-source", "--gen-subset", "test",
               "--beam", "2", "--max-len-b", "6", "--batch-size", "4", "--cpu"], tmp_path / "generate.log")
    assert f"sources longer than {TRUNCATE_TO} tokens are cut" in out
    assert f"the task's --max-source-positions {TRUNCATE_TO} is below the LED encoder's {LED_POSITIONS}" in out
    pairs = len(Path(led_data_bin.parent / "test.src").read_text().splitlines())
    hypotheses = re.findall(r"^H-(\d+)\t", out, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(pairs))
    sources = re.findall(r"^S-\d+\t(.*)$", out, flags=re.M)
    assert max(len(s.split()) for s in sources) == TRUNCATE_TO - 1  # + </s>, not printed
