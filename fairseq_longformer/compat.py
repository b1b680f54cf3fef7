"""Every patch the fairseq-fixed 0.12.3.1 / numpy 2 / torch >= 2.6 stack needs, in one place.

Imported first by ``fairseq_longformer/__init__.py``. Each patch names the failure it fixes, is
idempotent, and touches fairseq's own modules only (nothing process-wide beyond the numpy
aliases fairseq reads). Tests that fail without them: tests/test_compat.py and the training
tests (resume with --restore-file, --sample-break-mode eos, torchrun on CPU).
"""
import os
import types

import numpy as np
import torch


def _numpy_removed_aliases() -> None:
    """numpy 2 removed ``np.compat``, ``np.int`` and ``np.float``.

    Fails without it: ``TokenBlockDataset(..., break_mode="eos")`` dies with
    ``AttributeError: module 'numpy' has no attribute 'compat'`` (np.compat.long), and
    ``data_utils.compute_mask_indices`` with ``... has no attribute 'int'``.
    """
    if not hasattr(np, "compat"):
        np.compat = types.SimpleNamespace(long=int)
    for name, value in (("int", int), ("float", float)):
        if name not in np.__dict__:
            setattr(np, name, value)


class _TrustedCheckpointTorch(types.ModuleType):
    """``torch`` as seen by fairseq's checkpoint code: ``torch.load`` with weights_only=False.

    fairseq pickles argparse.Namespace / omegaconf DictConfig into its own checkpoints, which
    torch >= 2.6's default ``weights_only=True`` refuses. The override is scoped to the modules
    that load fairseq's own checkpoints, not process-wide.
    """

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def load(*args, **kwargs):
        kwargs.setdefault("weights_only", False)
        return torch.load(*args, **kwargs)


def _torch_load_weights_only() -> None:
    """torch >= 2.6 loads with weights_only=True.

    Fails without it: resuming (``--restore-file``, or re-running a command whose save dir has
    checkpoint_last.pt) stops with ``Unsupported global: argparse.Namespace``; under DDP, ranks
    other than 0 fail in ``broadcast_object`` on ``omegaconf.dictconfig.DictConfig``.
    """
    from fairseq import checkpoint_utils
    from fairseq.distributed import utils as distributed_utils

    for module in (checkpoint_utils, distributed_utils):
        if not isinstance(module.torch, _TrustedCheckpointTorch):
            module.torch = _TrustedCheckpointTorch()


def _torchrun_on_cpu() -> None:
    """torchrun on a machine without GPUs.

    Fails without it: ``fairseq/distributed/utils.py`` computes ``rank % torch.cuda.device_count()``
    (ZeroDivisionError), and ``pytorch_ddp`` builds DistributedDataParallel with
    ``device_ids=[0]`` for a CPU module (ValueError). With both fixed, ``torchrun
    --nproc_per_node 2 $(which fairseq-train) ... --cpu --distributed-backend gloo`` trains.
    """
    from fairseq.distributed import utils as distributed_utils
    from fairseq.models import distributed_fairseq_model

    original_infer = distributed_utils._infer_torch_distributed_launch_init
    if not getattr(original_infer, "_longformer_patched", False):

        def infer_torch_distributed_launch_init(cfg):
            if torch.cuda.device_count() > 0:
                return original_infer(cfg)
            cfg.distributed_init_method = "env://"
            cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
            cfg.distributed_rank = int(os.environ["RANK"])
            cfg.device_id = 0
            cfg.distributed_no_spawn = True

        infer_torch_distributed_launch_init._longformer_patched = True
        distributed_utils._infer_torch_distributed_launch_init = infer_torch_distributed_launch_init

    ddp = distributed_fairseq_model.DistributedDataParallel
    if not getattr(ddp, "_longformer_patched", False):

        class CpuAwareDistributedDataParallel(ddp):
            _longformer_patched = True

            def __init__(self, module, *args, device_ids=None, output_device=None, **kwargs):
                on_cpu = next(module.parameters()).device.type == "cpu"
                super().__init__(
                    module, *args,
                    device_ids=None if on_cpu else device_ids,
                    output_device=None if on_cpu else output_device,
                    **kwargs,
                )

        distributed_fairseq_model.DistributedDataParallel = CpuAwareDistributedDataParallel


def _atomic_checkpoint_copies() -> None:
    """fairseq copies a fresh checkpoint to its other names (checkpoint_last.pt, checkpoint_best.pt)
    with ``PathManager.copy``, which is ``shutil.copyfile`` straight onto the final name.

    Fails without it: a run killed during that copy (SIGKILL, OOM killer, preemption) leaves a
    truncated checkpoint_last.pt, and starting the same command again stops in ``torch.load``
    (``PytorchStreamReader failed reading zip archive``) instead of resuming. The first file of
    a save is already written as ``.tmp`` + rename (``torch_persistent_save``); with this, the
    copies are too (``atomic.atomic_copy``: to ``.<name>.tmp`` in the same folder, flushed to
    disk, then ``os.replace``), so each name holds either the previous complete checkpoint or the
    new one. Only ``fairseq.checkpoint_utils`` sees the change; remote paths (iopath) keep
    fairseq's copy.
    """
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    from .atomic import atomic_copy

    if getattr(checkpoint_utils.PathManager, "_longformer_patched", False):
        return

    class AtomicCopyPathManager(PathManager):
        _longformer_patched = True

        @staticmethod
        def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
            if "://" in dst_path or "://" in src_path:  # not a local file: iopath's handlers
                return PathManager.copy(src_path, dst_path, overwrite=overwrite)
            if not overwrite and os.path.exists(dst_path):
                return False
            atomic_copy(src_path, dst_path)
            return True

    checkpoint_utils.PathManager = AtomicCopyPathManager


def apply() -> None:
    _numpy_removed_aliases()
    _torch_load_weights_only()
    _torchrun_on_cpu()
    _atomic_checkpoint_copies()


apply()
