"""scripts/gpu_round.sh, the one command of a GPU lease, in its CPU form: the offline install
from Python 3.11 wheels (gathered as for the GPU image, fairseq-fixed reused from install.sh's
wheelhouse), the kernel checks, the suite's device tests, the training steps, the attention
benchmark, the summary. Each stage is narrowed to something tiny through the script's own
variables; the steps stage gets a 2-second limit so that a stage cut by its limit shows that
the next still runs."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(sys.executable).parent.parent / "wheelhouse"  # install.sh's fairseq-fixed wheel


def test_gpu_round_runs_every_stage_in_its_cpu_form(tmp_path):
    bundle = tmp_path / "bundle"
    gather = subprocess.run([sys.executable, str(REPO / "scripts" / "offline_bundle.py"), "gather", str(bundle),
                             "--python-version", "3.11", "--find-links", str(WHEELHOUSE)],
                            capture_output=True, text=True, timeout=300)
    assert gather.returncode == 0, gather.stdout + gather.stderr
    assert "fairseq_fixed-0.12.3.1-cp311-cp311-linux_x86_64.whl" in gather.stdout  # reused, not downloaded
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env.update(PYTHON=sys.executable, BUNDLE=str(bundle), ENV_DIR=str(tmp_path / "env"), OMP_NUM_THREADS="1",
               COMMIT="c0ffee", CHECK_CASES="n33_causal", STEPS_S="2", BENCH_ARGS="--contenders torch",
               SUITE_ARGS="--device cpu tests/integration/test_on_device.py -k masked_lm-bf16")
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(REPO / "scripts" / "gpu_round.sh"), str(out)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    log = (out / "all.log").read_text()
    assert run.returncode == 0, log[-3000:]
    for stage, rc in (("install", 0), ("checks", 0), ("suite", 0), ("steps", 124), ("bench", 0)):
        assert f"=== {stage}: rc {rc} " in log, (stage, log[-3000:])
    # the install: the wheels and the project in a new environment over this interpreter's torch
    assert "extension fairseq.data.token_block_utils_fast: loads" in log
    assert "23 console scripts import: fairseq-eval-lm" in log or "console scripts import: fairseq-eval-lm" in log
    site = tmp_path / "env" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert (site / "fairseq" / "__init__.py").is_file() and (site / "fairseq_longformer" / "__init__.py").is_file()
    assert not (site / "torch").exists()
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# GPU round: summary (read first)") and "commit c0ffee" in summary
    assert "| steps | 2 |" in summary and "cut at its time limit" in summary
    assert "1 check processes, " in summary and "**0 failed**" in summary
    assert "1 passed, " in summary  # the device test, through the installed environment's python
    assert "| torch | " in summary  # the benchmark's rows
    assert {p.name for p in out.iterdir()} == {"summary.md", "all.log", "checks.json", "suite.log", "bench.json"}
