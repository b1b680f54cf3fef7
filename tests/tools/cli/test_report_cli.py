"""``longformer-report`` on a tiny binarized corpus and a written training log: the installed
console script once, its failures in this process (no fill-mask demo: that needs a trained
checkpoint, see tests/integration/test_main_job.py)."""
import subprocess
import sys
from pathlib import Path

import pytest

from longformer_tools.cli import report as report_cli
from longformer_tools.report.unigram import unigram_baseline

SCRIPT = Path(sys.executable).parent / "longformer-report"
VALID = ("2026-11-23 22:11:02 | INFO | valid | epoch 001 | valid on 'valid' subset | loss {bpc} | bpc {bpc} | "
         "acc {acc} | num_updates {update}")
TRAIN = "2026-11-23 22:11:08 | INFO | train_inner | epoch 001: bpc={bpc}, wps={wps}, num_updates={update}"


@pytest.fixture
def finished_job(tmp_path, tiny_binaries):
    """(data dir, save dir): binaries, and a log whose valid BPC goes 3.5 -> 0.25 (updates 10, 20)."""
    data, save = tmp_path / "data", tmp_path / "save"
    data.mkdir()
    save.mkdir()
    tiny_binaries(data, train=[list("aaab"), list("abc")], valid=[list("aab"), list("dd")])
    lines = [TRAIN.format(bpc=4.0, wps=1000, update=5), VALID.format(bpc=3.5, acc=10.0, update=10),
             TRAIN.format(bpc=1.0, wps=3000, update=15), VALID.format(bpc=0.25, acc=80.0, update=20)]
    (save / "train.log").write_text("\n".join(lines) + "\n")
    return data, save


def test_summary_and_plot(finished_job):
    data, save = finished_job
    done = subprocess.run([str(SCRIPT), "--data", str(data), "--save-dir", str(save), "--fill-mask", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    base = unigram_baseline(data, "valid")
    below = base.entropy - 0.25
    assert f"valid BPC: 3.500 at update 10 -> 0.250 at update 20 ({below:.2f} bits below" in done.stdout
    assert f"own entropy {base.entropy:.3f}" in done.stdout
    assert "valid accuracy (masked tokens): 10.0% -> 80.0%" in done.stdout
    assert "training speed: 2,000 tokens/s (mean over 2 logged intervals)" in done.stdout
    assert (save / "bpc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_expected_gain_not_reached_exits_1(finished_job, capsys):
    data, save = finished_job
    assert report_cli.main(["--data", str(data), "--save-dir", str(save), "--fill-mask", "0",
                            "--expect-bits-below", "5"]) == 1
    assert "fewer than the 5.0 expected" in capsys.readouterr().err


def test_missing_log_is_one_line_and_writes_nothing(finished_job):
    """sys.exit with a message: Python prints it as the one line on stderr and exits with 1."""
    data, save = finished_job
    (save / "train.log").unlink()
    with pytest.raises(SystemExit) as stopped:
        report_cli.main(["--data", str(data), "--save-dir", str(save), "--fill-mask", "0"])
    assert stopped.value.code == (
        f"longformer-report: no training log at {save / 'train.log'}: save fairseq-train's output there "
        f"(fairseq-train ... 2>&1 | tee -a {save / 'train.log'}) or pass --log-file")
    assert list(save.iterdir()) == []
