"""Each runtime patch (fairseq_longformer/runtime/), by the behaviour it restores (each of these
fails without its patch).
End-to-end checks live elsewhere: resume in test_main_job.py, torchrun in tests/integration/."""
import argparse

import numpy as np
import pytest
import torch

import fairseq_longformer  # noqa: F401  (applies the patches)


def test_token_block_eos_mode_on_numpy_2():
    from fairseq.data import ListDataset, TokenBlockDataset

    items = [torch.tensor([5, 6, 2]), torch.tensor([7, 2])]
    sizes = np.array([3, 2])
    blocks = TokenBlockDataset(ListDataset(items, sizes), sizes, 8, pad=1, eos=2, break_mode="eos")
    assert [blocks[i].tolist() for i in range(len(blocks))] == [[5, 6, 2], [7, 2]]


def test_compute_mask_indices_on_numpy_2():
    from fairseq.data.data_utils import compute_mask_indices

    mask = compute_mask_indices((2, 50), None, mask_prob=0.2, mask_length=4)
    assert mask.shape == (2, 50) and mask.any()


def test_fairseq_checkpoints_load_under_weights_only_default(kjv_data_bin, tmp_path):
    """A checkpoint written by fairseq-train (it pickles its DictConfig) loads for resuming."""
    import subprocess
    import sys
    from pathlib import Path

    from fairseq import checkpoint_utils

    from tests.conftest import TINY_MODEL_ARGS

    subprocess.run(
        [str(Path(sys.executable).parent / "fairseq-train"), str(kjv_data_bin), *TINY_MODEL_ARGS,
         "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3", "--max-update", "1", "--cpu",
         "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--disable-validation"],
        check=True, capture_output=True,
    )
    state = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "checkpoint_last.pt"))
    assert state["cfg"].model.arch == "longformer_base"
    assert state["optimizer_history"][-1]["num_updates"] == 1


def test_weights_only_stays_the_default_outside_fairseq(tmp_path):
    """The patch is scoped to fairseq's checkpoint modules: plain torch.load stays safe."""
    path = tmp_path / "untrusted.pt"
    torch.save({"args": argparse.Namespace(x=1)}, path)
    with pytest.raises(Exception, match="weights_only|Unsupported global"):
        torch.load(path)


def test_torchrun_init_without_gpus(monkeypatch):
    from fairseq.dataclass.configs import DistributedTrainingConfig
    from fairseq.distributed import utils as distributed_utils

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    cfg = DistributedTrainingConfig()
    distributed_utils._infer_torch_distributed_launch_init(cfg)
    assert (cfg.distributed_world_size, cfg.distributed_rank, cfg.device_id) == (2, 1, 0)
    assert cfg.distributed_no_spawn


@pytest.mark.parametrize("with_vec", [False, True])
def test_batch_by_size_keeps_the_last_short_batch(with_vec):
    """13 examples in batches of 8 with --required-batch-size-multiple 8: fairseq-fixed drops the
    last 5; patched, every example is in exactly one batch, in order, the full batches unchanged."""
    from fairseq.data import data_utils

    indices = np.arange(100, 113)
    kwargs = dict(num_tokens_vec=np.full(13, 10) if with_vec else None, max_sentences=8,
                  required_batch_size_multiple=8)
    batches = data_utils.batch_by_size(indices, lambda i: 10, **kwargs)
    assert [b.tolist() for b in batches] == [list(range(100, 108)), list(range(108, 113))]
    original = data_utils.batch_by_size.original  # what the patch wraps
    assert [b.tolist() for b in original(indices, lambda i: 10, **kwargs)] == [list(range(100, 108))]
    # a multiple the batches already meet: nothing added
    assert len(data_utils.batch_by_size(np.arange(16), lambda i: 10, max_sentences=8,
                                        required_batch_size_multiple=8)) == 2
