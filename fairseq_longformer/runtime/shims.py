"""Shims for the library versions under the plugin: fairseq-fixed 0.12.3.1 on numpy 2, torch >= 2.6,
machines without CUDA or a TPU, and hydra 1.3.

Each function installs one patch, names the failure it fixes, is idempotent, and touches
fairseq's own modules only (nothing process-wide beyond the numpy aliases fairseq reads and the
warning filters). ``runtime.apply`` calls them; the tests that fail without them:
tests/plugin/test_compat.py and the training tests (resume with --restore-file,
--sample-break-mode eos, torchrun on CPU, --bf16 and --fp16 on CPU).
"""
import os
import sys
import types
import warnings

import numpy as np
import torch
from fairseq import checkpoint_utils, options, trainer
from fairseq.distributed import utils as distributed_utils
from fairseq.models import distributed_fairseq_model
from fairseq.models.fairseq_model import BaseFairseqModel

from .checkpoints import fairseq_torch_load, parse_args_and_arch_with_trust


def numpy_removed_aliases() -> None:
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


class _CheckpointTorch(types.ModuleType):
    """``torch`` as seen by fairseq's checkpoint code: ``torch.load`` is ``checkpoints.
    fairseq_torch_load`` (weights_only=True with fairseq's own types allowed, or the run's
    ``--trust-checkpoint``). Scoped to the modules that load fairseq's checkpoints."""

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def load(f, map_location=None, **kwargs):
        return fairseq_torch_load(f, map_location=map_location)


def checkpoint_loads_as_data() -> None:
    """torch >= 2.6 loads with weights_only=True.

    Fails without it: resuming (``--restore-file``, or re-running a command whose save dir has
    checkpoint_last.pt) stops with ``Unsupported global: argparse.Namespace``; under DDP, ranks
    other than 0 fail in ``broadcast_object`` on ``omegaconf.dictconfig.DictConfig``. The fix
    keeps weights_only=True and allows exactly those types (``checkpoints.safe_globals``), so a
    checkpoint from someone else is still data; ``--trust-checkpoint`` (added to every fairseq
    CLI's parser here) turns that off for the run.
    """
    for module in (checkpoint_utils, distributed_utils):
        if not isinstance(module.torch, _CheckpointTorch):
            module.torch = _CheckpointTorch()
    if not getattr(options.parse_args_and_arch, "_longformer_patched", False):
        options.parse_args_and_arch = parse_args_and_arch_with_trust(options.parse_args_and_arch)


def torchrun_on_cpu() -> None:
    """torchrun on a machine without GPUs.

    Fails without it: ``fairseq/distributed/utils.py`` computes ``rank % torch.cuda.device_count()``
    (ZeroDivisionError), and ``pytorch_ddp`` builds DistributedDataParallel with
    ``device_ids=[0]`` for a CPU module (ValueError). With both fixed, ``torchrun
    --nproc_per_node 2 $(which fairseq-train) ... --cpu --distributed-backend gloo`` trains.
    """
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


def _tpu_asked_for_on_the_command_line() -> bool:
    """Whether the user passed ``--tpu`` (fairseq's parser accepts no abbreviation of it)."""
    return "--tpu" in sys.argv[1:]


def bf16_without_a_tpu() -> None:
    """fairseq's ``options.parse_args_and_arch`` turns every ``--bf16`` (and
    ``--memory-efficient-bf16``) into ``--tpu``.

    Fails without it: ``fairseq-train --bf16`` on CPU or CUDA stops in the Trainer with
    ``AttributeError: 'NoneType' object has no attribute 'xla_device'`` (it asks torch_xla for
    the device). With it, ``--tpu`` is implied only when the user asked for a TPU (``--tpu`` on
    the command line); otherwise the run trains a bf16 model on CPU/CUDA: ``--bf16`` with fp32
    master weights (fairseq's FP16Optimizer, unflattened for bf16), ``--memory-efficient-bf16``
    without them (MemoryEfficientFP16Optimizer); both run without a loss scaler, which bf16's
    fp32-sized exponent does not need. The fix sits in ``distributed_utils.call_main``, the first
    fairseq function every CLI (train, eval-lm, generate, validate) calls after parsing: the
    user dir, and so this module, is imported while the parse that sets ``tpu`` is already
    running. fairseq-hydra-train never implies a TPU, so its configs are left alone.
    """
    original = distributed_utils.call_main
    if getattr(original, "_longformer_patched", False):
        return

    def call_main(cfg, main, **kwargs):
        common = cfg.common
        from_argparse = "fairseq_cli.hydra_train" not in sys.modules
        if from_argparse and getattr(common, "bf16", False) and common.tpu \
                and not _tpu_asked_for_on_the_command_line():
            common.tpu = False
            cfg.distributed_training.tpu = False
        return original(cfg, main, **kwargs)

    call_main._longformer_patched = True
    distributed_utils.call_main = call_main


def bf16_inference() -> None:
    """fairseq-eval-lm and fairseq-generate cast the model for ``--fp16`` only (``model.half()``).

    Fails without it: ``fairseq-eval-lm --bf16`` / ``fairseq-generate --bf16`` (once
    ``bf16_without_a_tpu`` lets them start) silently evaluate in fp32, so a bf16 model is never
    evaluated as it trained. With it, ``prepare_for_inference_``, which both call on every model
    right after that cast, casts the model to bf16 when ``common.bf16`` is set.
    """
    original = BaseFairseqModel.prepare_for_inference_
    if getattr(original, "_longformer_patched", False):
        return

    def prepare_for_inference_(self, cfg):
        common = getattr(cfg, "common", None)
        if common is not None and getattr(common, "bf16", False) and not getattr(common, "fp16", False):
            self.to(dtype=torch.bfloat16)
        return original(self, cfg)

    prepare_for_inference_._longformer_patched = True
    BaseFairseqModel.prepare_for_inference_ = prepare_for_inference_


class _CpuTrainerTorch(types.ModuleType):
    """``torch`` as seen by ``fairseq/trainer.py`` on a machine without CUDA: ``torch.tensor``
    gives tensors whose ``.cuda()`` keeps them where they are (the trainer's only such call is
    the zero gradient norm of a skipped fp16 step); everything else is torch itself."""

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(*args, **kwargs):
        made = torch.tensor(*args, **kwargs)
        if not torch.cuda.is_available():
            made.cuda = lambda *_, **__: made
        return made


def fp16_overflow_on_cpu() -> None:
    """fairseq's Trainer answers an fp16 gradient overflow with ``torch.tensor(0.0).cuda()``.

    Fails without it: ``--memory-efficient-fp16`` (or ``--fp16``) on CPU stops at the first
    overflow, the dynamic loss scaler's ordinary way of finding its scale, with
    ``AssertionError: Torch not compiled with CUDA enabled`` (seen with the char-LM, whose tied
    embeddings' gradient of a frequent character overflows at the initial scale 128). With it,
    the step is skipped and the scale halved, as on a GPU. Only ``fairseq.trainer`` sees the
    change, and only on machines without CUDA.
    """
    if not isinstance(trainer.torch, _CpuTrainerTorch):
        trainer.torch = _CpuTrainerTorch()


# Warnings the stack prints on every run that no user of this project can act on (they concern
# fairseq's own code). Matched by message, so every other warning still shows.
_UNACTIONABLE_WARNINGS = (
    # hydra 1.3 on fairseq's hydra-1.0-era config code (convert_namespace_to_omegaconf)
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),
    (UserWarning, r"In 'config': Usage of deprecated keyword in package header"),
    (UserWarning, r"\s*'config' is validated against ConfigStore schema"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    # fairseq's DataLoader asks for pinned memory on CPU-only machines too
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
    # fairseq_task.py calls torch.cuda.amp.autocast(enabled=False) around every step
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated"),
)


def quiet_unactionable_warnings() -> None:
    """fairseq-train prints a dozen hydra deprecation warnings, a pin_memory warning and an
    autocast FutureWarning on every run (see ``_UNACTIONABLE_WARNINGS``); they bury the lines a
    user needs. Each is ignored by its exact message; nothing else is silenced."""
    for category, message in _UNACTIONABLE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
