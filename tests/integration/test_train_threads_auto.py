"""``fairseq-train`` under ``LONGFORMER_THREADS=auto`` (docs/cpu.md): the plugin sets the thread
count from the free cores when it loads, says so in its log, and training runs through its
updates with the re-checking ``Trainer.set_num_updates`` in place. Whatever count the shared
machine gives; nothing is timed."""
import re

from tests.support.training import FAIRSEQ_TRAIN, run_logged, subprocess_env, tiny_train_cmd, train_inner


def test_fairseq_train_under_threads_auto(kjv_data_bin, tmp_path):
    env = {k: v for k, v in subprocess_env().items() if k != "OMP_NUM_THREADS"}  # an explicit count would win
    env["LONGFORMER_THREADS"] = "auto"
    text = run_logged([FAIRSEQ_TRAIN, *tiny_train_cmd(kjv_data_bin, tmp_path / "ckpt", 4, "--no-epoch-checkpoints")],
                      tmp_path / "train.log", timeout=300, env=env)
    started = re.search(r"threads: (\d+) \(LONGFORMER_THREADS=auto: the free cores, at most (\d+)", text)
    assert started, text[-2000:]
    assert 1 <= int(started.group(1)) <= int(started.group(2))
    assert sorted(train_inner(text)) == [1, 2, 3, 4]
