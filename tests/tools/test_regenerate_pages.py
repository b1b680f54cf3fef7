"""``scripts/regenerate_pages.sh`` at SMOKE=1 (tiny sizes into a temporary folder): every stage
runs and writes its page, with at least 5 timed calls per model and the run's provenance (commit,
CPU model, date, load average). What it writes, never how fast."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL_PAGES = ("mlm_step_4096", "led_encoder_1layer", "charlm_step_cpu")
SERVING_PAGES = ("hf_accelerate_cpu", "hf_accelerate_cpu_1thread", "hf_accelerate_cpu_short")


def test_smoke_run_writes_every_page(tmp_path):
    env = dict(os.environ, SMOKE="1", OUT=str(tmp_path), VENV=str(Path(sys.executable).parent.parent))
    done = subprocess.run(["bash", str(REPO / "scripts" / "regenerate_pages.sh")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.count("=== ") == 1 + len(MODEL_PAGES) + len(SERVING_PAGES)  # a stage line per page
    for page in ("onnx_cpu", *MODEL_PAGES, *SERVING_PAGES):
        assert (tmp_path / f"{page}.md").exists(), page
        report = json.loads((tmp_path / f"{page}.json").read_text())
        provenance = report["provenance"]
        assert provenance["commit"] and provenance["cpu"] and provenance["date"], page
        assert len(provenance["load_average"]) == 3, page
        if page == "onnx_cpu" or page in SERVING_PAGES:
            assert all(len(row[side]["runs_s"]) >= 5 for row in report["results"] for side in ("stock", "accelerated"))
        else:
            assert all(row["status"] == "ok" and len(row["fwd_bwd_ms_all"]) >= 5 for row in report["results"]), page
