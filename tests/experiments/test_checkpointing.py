"""longformer_experiments.checkpointing: each setting measured in a fresh process of the module
itself, the flag reaching fairseq's parser, and the same loss with and without activation
checkpointing (recomputing activations must not change the forward)."""
import json
import os
import subprocess
import sys


def test_both_settings_run_in_fresh_processes_with_the_same_loss():
    done = subprocess.run([sys.executable, "-m", "longformer_experiments.checkpointing", "--layers", "1",
                           "--tokens", "256", "--window", "32", "--threads", "1", "--cpu"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    plain, checkpointed = (json.loads(line) for line in done.stdout.splitlines()[:2])
    assert (plain["checkpoint_activations"], checkpointed["checkpoint_activations"]) == (False, True)
    assert plain["layers"] == checkpointed["layers"] == 1 and plain["tokens"] == 256
    assert plain["loss"] == checkpointed["loss"]
    assert "forward+backward memory:" in done.stdout
