"""runtime.resume.atomic_checkpoint_copies: fairseq's save_checkpoint writes checkpoint_1_N.pt via .tmp +
rename, then COPIES it to checkpoint_last.pt; unpatched, that copy is shutil.copyfile onto the
final name, so a kill during it leaves a truncated checkpoint_last.pt and the run cannot resume.

The crash is real: a child process runs fairseq's own ``checkpoint_utils.save_checkpoint`` with
``shutil.copyfile`` replaced by one that writes half the bytes and then SIGKILLs its own process.
"""
import subprocess
import sys
import textwrap

import pytest
import torch

_CHILD = textwrap.dedent(r"""
    import os, shutil, signal, sys
    import torch
    import fairseq_longformer  # noqa: F401  (applies the runtime patches)
    from fairseq import checkpoint_utils
    from fairseq.dataclass.configs import CheckpointConfig
    from fairseq.file_io import PathManager

    save_dir, patched = sys.argv[1], sys.argv[2] == "1"
    if not patched:  # fairseq as shipped
        checkpoint_utils.PathManager = PathManager

    class Trainer:  # what save_checkpoint asks of fairseq's Trainer
        data_parallel_rank = 0
        should_save_checkpoint_on_current_rank = True
        always_call_state_dict_during_save_checkpoint = False
        checkpoint_suffix = ""
        task = object()
        def __init__(self, updates):
            self.updates = updates
        def consolidate_optimizer(self):
            pass
        def get_num_updates(self):
            return self.updates
        def save_checkpoint(self, filename, extra_state):
            state = {"model": {"w": torch.full((1 << 18,), float(self.updates))},
                     "updates": self.updates, "extra_state": extra_state}
            checkpoint_utils.torch_persistent_save(state, filename)

    class EpochIterator:
        epoch = 1
        def end_of_epoch(self):
            return False
        def state_dict(self):
            return {"epoch": 1, "iterations_in_epoch": 0}

    cfg = CheckpointConfig(save_dir=save_dir, save_interval_updates=5, no_epoch_checkpoints=True)
    checkpoint_utils.save_checkpoint(cfg, Trainer(5), EpochIterator(), None)

    def copy_then_die(src, dst, *args, **kwargs):  # the kill lands in the middle of the copy
        with open(src, "rb") as f:
            data = f.read()
        with open(dst, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    shutil.copyfile = copy_then_die
    checkpoint_utils.save_checkpoint(cfg, Trainer(10), EpochIterator(), None)
    raise SystemExit("not reached: the copy kills the process")
""")


def _save_and_die(tmp_path, patched: bool):
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), "1" if patched else "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, f"expected the child to die by SIGKILL:\n{proc.stderr[-3000:]}"
    # the new checkpoint itself was complete before the copy began
    assert torch.load(tmp_path / "checkpoint_1_10.pt", weights_only=False)["updates"] == 10


def test_kill_during_copy_leaves_a_complete_checkpoint_last(tmp_path):
    _save_and_die(tmp_path, patched=True)
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    assert state["updates"] == 5  # the kill came before os.replace: still the previous one
    assert torch.equal(state["model"]["w"], torch.full((1 << 18,), 5.0))
    # the half-written temporary the kill left is overwritten by the next copy, not accumulated
    import fairseq_longformer  # noqa: F401
    from fairseq import checkpoint_utils

    assert checkpoint_utils.PathManager.copy(str(tmp_path / "checkpoint_1_10.pt"),
                                             str(tmp_path / "checkpoint_last.pt"), overwrite=True)
    assert torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)["updates"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1_10.pt", "checkpoint_1_5.pt",
                                                          "checkpoint_last.pt"]


def test_without_the_patch_the_same_kill_corrupts_checkpoint_last(tmp_path):
    """The failure the patch fixes, reproduced: proves the test above can fail."""
    _save_and_die(tmp_path, patched=False)
    with pytest.raises(RuntimeError, match="PytorchStreamReader failed reading zip archive"):
        torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)


def test_patched_copy_replaces_the_file_and_leaves_no_temporary(tmp_path):
    import fairseq_longformer  # noqa: F401
    from fairseq import checkpoint_utils

    src, dst = tmp_path / "checkpoint_1_10.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new" * 1000)
    dst.write_bytes(b"old")
    assert checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"new" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1_10.pt", "checkpoint_last.pt"]
    assert not checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=False)
