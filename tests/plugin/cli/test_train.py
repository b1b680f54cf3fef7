"""``longformer-train`` works from any directory (fairseq's --user-dir is a path)."""
import subprocess
import sys
from pathlib import Path

from tests.conftest import TINY_MODEL_ARGS


def test_longformer_train_from_another_directory(kjv_data_bin, tmp_path):
    args = TINY_MODEL_ARGS[2:]  # everything but --user-dir
    assert "--user-dir" not in args
    result = subprocess.run(
        [str(Path(sys.executable).parent / "longformer-train"), str(kjv_data_bin), *args,
         "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3", "--max-update", "2", "--cpu",
         "--save-dir", str(tmp_path / "ckpt"), "--no-save", "--disable-validation", "--log-format", "simple",
         "--log-interval", "1"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "num_updates=2" in result.stdout + result.stderr
    assert "LongformerModel" in result.stdout + result.stderr
