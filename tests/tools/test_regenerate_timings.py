"""``scripts/regenerate_timings.sh`` at SMOKE=1 (tiny sizes into a temporary folder): every stage
runs and writes its page or report, the busy stages included. What it writes, never how fast."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_every_page(tmp_path):
    pytest.importorskip("matplotlib")
    env = dict(os.environ, SMOKE="1", OUT=str(tmp_path), VENV=str(Path(sys.executable).parent.parent))
    env.pop("OMP_NUM_THREADS", None)  # the busy stages' --threads auto, not a count of the caller's
    done = subprocess.run(["bash", str(REPO / "scripts" / "regenerate_timings.sh")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for page in ("attention_layer_4096", "figure1_cpu", "core_dropout", "attention_layer_4096_profile",
                 "attention_layer_4096_busy", "train_step_quickstart_omp"):
        assert (tmp_path / f"{page}.md").exists() and (tmp_path / f"{page}.json").exists(), page
    for page in ("attention_layer_4096", "figure1_cpu", "attention_layer_4096_busy"):
        report = json.loads((tmp_path / f"{page}.json").read_text())
        assert report["matmul_peak"]["float32"]["gflops"] > 0
        assert "| of peak |" in (tmp_path / f"{page}.md").read_text()
    busy_page = (tmp_path / "attention_layer_4096_busy.md").read_text()
    assert "## Beside a busy process" in busy_page
    assert "Threads: auto (--threads auto" in busy_page  # the busy pages state their thread policy
    train = json.loads((tmp_path / "train_step_quickstart_busy.json").read_text())
    assert {e["name"] for e in train["busy_summary"]} == {"longformer_mlm", "roberta_sdpa_mlm"}
    assert train["environment"]["thread_policy"].startswith("auto (--threads auto")
    assert train["environment"]["threads"] >= 1 and train["environment"]["threads_busy"] >= 1
    omp = json.loads((tmp_path / "train_step_quickstart_omp.json").read_text())
    assert {e["variant"] for e in omp["summary"]} == {"libgomp-default", "passive", "spin1000"}
