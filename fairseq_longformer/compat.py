"""Every patch the fairseq-fixed 0.12.3.1 / numpy 2 / torch >= 2.6 stack needs, in one place.

Imported first by ``fairseq_longformer/__init__.py``. Each patch names the failure it fixes, is
idempotent, and touches fairseq's own modules only (nothing process-wide beyond the numpy
aliases fairseq reads). Tests that fail without them: tests/plugin/test_compat.py and the training
tests (resume with --restore-file, --sample-break-mode eos, torchrun on CPU).
"""
import atexit
import logging
import os
import sys
import types
import warnings
import zipfile

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
        from .checkpoints import fairseq_torch_load

        return fairseq_torch_load(f, map_location=map_location)


def _torch_load_weights_only() -> None:
    """torch >= 2.6 loads with weights_only=True.

    Fails without it: resuming (``--restore-file``, or re-running a command whose save dir has
    checkpoint_last.pt) stops with ``Unsupported global: argparse.Namespace``; under DDP, ranks
    other than 0 fail in ``broadcast_object`` on ``omegaconf.dictconfig.DictConfig``. The fix
    keeps weights_only=True and allows exactly those types (``checkpoints.safe_globals``), so a
    checkpoint from someone else is still data; ``--trust-checkpoint`` (added to every fairseq
    CLI's parser here) turns that off for the run.
    """
    from fairseq import checkpoint_utils, options
    from fairseq.distributed import utils as distributed_utils

    from .checkpoints import parse_args_and_arch_with_trust

    for module in (checkpoint_utils, distributed_utils):
        if not isinstance(module.torch, _CheckpointTorch):
            module.torch = _CheckpointTorch()
    if not getattr(options.parse_args_and_arch, "_longformer_patched", False):
        options.parse_args_and_arch = parse_args_and_arch_with_trust(options.parse_args_and_arch)


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

    from longformer_common.atomic import atomic_copy

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


def is_intact_checkpoint(path: str) -> bool:
    """Whether ``path`` is a complete ``torch.save`` file: a zip archive whose central directory
    (written last, so lost by truncation) lists a pickle, and whose every member matches its
    CRC-32 (flipped bytes inside an intact directory would otherwise load as wrong weights).
    Reads the whole file (``checkpoints.damage``, the check every load makes)."""
    from .checkpoints import damage

    try:
        return zipfile.is_zipfile(path) and not damage(path)
    except OSError:
        return False


def newest_intact_checkpoint(save_dir: str, skip: str):
    """The most recently written intact ``checkpoint*.pt`` of ``save_dir`` other than ``skip``."""
    candidates = [os.path.join(save_dir, name) for name in os.listdir(save_dir)
                  if name.startswith("checkpoint") and name.endswith(".pt") and name != os.path.basename(skip)]
    candidates.sort(key=lambda path: (os.path.getmtime(path), path), reverse=True)
    return next((path for path in candidates if is_intact_checkpoint(path)), None)


def _resume_past_a_broken_last_checkpoint() -> None:
    """fairseq resumes from ``<save-dir>/checkpoint_last.pt`` whatever it holds.

    Fails without it: a checkpoint_last.pt that is truncated, empty or not a checkpoint (disk
    full, a copy cut short by a node failure) stops the same command with a zip-reader traceback
    (``PytorchStreamReader failed reading zip archive``), though ``checkpoint_1_10.pt`` beside it
    is intact. With it, the run resumes from the newest intact checkpoint of the folder with a
    warning naming the bad file; when none is intact it stops with an error naming the folder and
    the fix, and writes nothing. Only the default restore file is concerned (an explicit
    --restore-file that is broken is the user's error, reported in one line by the loader,
    ``checkpoints.fairseq_torch_load``).
    """
    from fairseq import checkpoint_utils

    from .user_errors import UserInputError

    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_longformer_patched", False):
        return
    logger = logging.getLogger("fairseq_longformer.compat")

    def load_checkpoint(cfg, trainer, **kwargs):
        suffix = getattr(trainer, "checkpoint_suffix", "") or ""
        last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        if cfg.restore_file != "checkpoint_last.pt" or not os.path.exists(last) or is_intact_checkpoint(last):
            return original(cfg, trainer, **kwargs)
        replacement = newest_intact_checkpoint(cfg.save_dir, skip=last)
        if replacement is None:
            raise UserInputError(  # one line (user_errors), not a traceback
                f"cannot resume: {last} is not a complete checkpoint (truncated, empty or another "
                f"kind of file) and no other intact checkpoint*.pt is in {cfg.save_dir}; move or "
                "delete it to start from scratch, or pass --restore-file PATH to start from another "
                "checkpoint")
        logger.warning("%s is not a complete checkpoint (truncated, empty or another kind of file); "
                       "resuming from %s, the newest intact checkpoint in the folder", last, replacement)
        restore_file = cfg.restore_file
        cfg.restore_file = replacement
        try:
            return original(cfg, trainer, **kwargs)
        finally:
            cfg.restore_file = restore_file

    load_checkpoint._longformer_patched = True
    checkpoint_utils.load_checkpoint = load_checkpoint

def _keep_the_last_short_batch() -> None:
    """fairseq-fixed 0.12.3.1's ``data_utils.batch_by_size`` drops the last batch when its size is
    not a multiple of ``--required-batch-size-multiple`` (8 by default).

    Fails without it: examples silently left out of every epoch and every validation (13 valid
    examples with --batch-size 8 score 8), ``fairseq-generate`` translating 4 of 6 sentences, and
    ``--batch-size`` below the multiple giving no batch at all (ZeroDivisionError). With it, the
    dropped examples come back as a last, short batch, as fairseq before that change did.
    """
    from fairseq.data import data_utils

    original = data_utils.batch_by_size
    if getattr(original, "_longformer_patched", False):
        return

    def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                      required_batch_size_multiple=1, fixed_shapes=None):
        batches = original(indices, num_tokens_fn, num_tokens_vec, max_tokens, max_sentences,
                           required_batch_size_multiple, fixed_shapes)
        if required_batch_size_multiple <= 1 or fixed_shapes is not None:
            return batches
        indices = np.asarray(indices, dtype=np.int64)
        covered = sum(len(b) for b in batches)
        if covered == len(indices):
            return batches
        # the batches are consecutive runs of ``indices``: what was dropped is its tail
        rest = original(indices[covered:], num_tokens_fn,
                        None if num_tokens_vec is None else np.asarray(num_tokens_vec)[covered:],
                        max_tokens, max_sentences, 1, None)
        return list(batches) + list(rest)

    batch_by_size._longformer_patched = True
    batch_by_size.original = original  # fairseq-fixed's own, which drops the short batch
    data_utils.batch_by_size = batch_by_size



def _lr_scale(p) -> float:
    return float(((getattr(p, "optim_overrides", None) or {}).get("optimizer") or {}).get("lr_scale", 1.0))


def _per_group_learning_rates() -> None:
    """Two learning rates with one schedule each, through fairseq's own parameter-group tags.

    fairseq tags parameters with ``param_group`` and ``optim_overrides={"optimizer": {"lr_scale":
    s}}``, but only its ``composite`` optimizer reads them, and that one is configured by a
    ``groups`` dictionary that fairseq-train's argparse cannot take (``--groups``: the Dict field
    becomes ``type=Dict[str, Any]``, an error on any value). Fails without it: every tagged
    parameter trains at the one ``--lr`` (``build_optimizer`` flattens them into one torch param
    group and ``FairseqOptimizer.set_lr`` sets every group to the scheduler's rate), so the
    coreference head (task ``longformer_coref``) would learn at the encoder's 1e-5. With it,
    parameters of one ``lr_scale`` form one torch parameter group (in order of first appearance:
    the encoder's first, whose rate fairseq logs as ``lr``), and ``set_lr`` gives each group the
    scheduler's rate times its scale. Untagged runs are unchanged (one group, scale 1). fp16 with
    flattened gradients would fold the groups into one tensor: refused with the flag that avoids it.
    """
    from fairseq import optim
    from fairseq.optim.fairseq_optimizer import FairseqOptimizer
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    original = optim.build_optimizer
    if getattr(original, "_longformer_patched", False):
        return

    def build_optimizer(cfg, params, *extra_args, **extra_kwargs):
        params = list(params)
        if params and all(isinstance(p, dict) for p in params):
            params = [t for p in params for t in p.values()]
        params = [p for p in params if p.requires_grad]
        scales = {}
        for p in params:
            scales.setdefault(_lr_scale(p), []).append(p)
        if len(scales) > 1:
            groups = [{"params": ps, "lr_scale": scale} for scale, ps in scales.items()]
            # the registry's builder: fairseq's build_optimizer would flatten the groups again
            return optim._build_optimizer(cfg, groups, *extra_args, **extra_kwargs)
        return original(cfg, params, *extra_args, **extra_kwargs)

    def set_lr(self, lr):
        for param_group in self.param_groups:
            param_group["lr"] = lr * param_group.get("lr_scale", 1.0)

    fp16_build = FP16Optimizer.build_optimizer.__func__

    def build_fp16(cls, cfg, params, **kwargs):
        params = list(params)
        flatten = not getattr(cfg.common, "fp16_no_flatten_grads", False) and not getattr(cfg.common, "bf16", False)
        if flatten and len({_lr_scale(p) for p in params}) > 1:
            from .user_errors import UserInputError

            raise UserInputError("--fp16 flattens the parameters into one tensor, which loses the head's own "
                                 "learning rate: add --fp16-no-flatten-grads")
        return fp16_build(cls, cfg, params, **kwargs)

    build_optimizer._longformer_patched = True
    optim.build_optimizer = build_optimizer
    FairseqOptimizer.set_lr = set_lr
    FP16Optimizer.build_optimizer = classmethod(build_fp16)


def _tpu_asked_for_on_the_command_line() -> bool:
    """Whether the user passed ``--tpu`` (fairseq's parser accepts no abbreviation of it)."""
    return "--tpu" in sys.argv[1:]


def _bf16_without_a_tpu() -> None:
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
    from fairseq.distributed import utils as distributed_utils

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



def _bf16_inference() -> None:
    """fairseq-eval-lm and fairseq-generate cast the model for ``--fp16`` only (``model.half()``).

    Fails without it: ``fairseq-eval-lm --bf16`` / ``fairseq-generate --bf16`` (once
    ``_bf16_without_a_tpu`` lets them start) silently evaluate in fp32, so a bf16 model is never
    evaluated as it trained. With it, ``prepare_for_inference_``, which both call on every model
    right after that cast, casts the model to bf16 when ``common.bf16`` is set.
    """
    from fairseq.models.fairseq_model import BaseFairseqModel

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


def _fp16_overflow_on_cpu() -> None:
    """fairseq's Trainer answers an fp16 gradient overflow with ``torch.tensor(0.0).cuda()``.

    Fails without it: ``--memory-efficient-fp16`` (or ``--fp16``) on CPU stops at the first
    overflow, the dynamic loss scaler's ordinary way of finding its scale, with
    ``AssertionError: Torch not compiled with CUDA enabled`` (seen with the char-LM, whose tied
    embeddings' gradient of a frequent character overflows at the initial scale 128). With it,
    the step is skipped and the scale halved, as on a GPU. Only ``fairseq.trainer`` sees the
    change, and only on machines without CUDA.
    """
    from fairseq import trainer

    if not isinstance(trainer.torch, _CpuTrainerTorch):
        trainer.torch = _CpuTrainerTorch()



def _one_run_per_save_dir() -> None:
    """fairseq-train makes ``--save-dir`` (and writes a ``dummy`` file into it) before reading
    anything, and never locks it.

    Fails without it: a run refused for a bad input leaves an empty save dir behind (the bad-input
    table pre-created its folder, which hid it); two runs started into the same folder both finish
    with exit 0, every checkpoint of the first replaced by the second's. With it
    (``training_inputs``): at the start the folder is only checked (writable, or creatable), and
    locked if it exists; it is made, and held by the run's flock until the process ends, once the
    restore and the training data are loaded; a second run is refused in one line; a folder the run
    made and left empty is removed at exit. Only the master rank, which writes, takes it. The lock
    is the folder's own flock (``atomic.hold_folder``): a killed run's lock is gone with it.
    fairseq-hydra-train binds ``call_main`` before the plugin loads: the release runs at exit there.
    """
    from fairseq import checkpoint_utils
    from fairseq.distributed import utils as distributed_utils

    from . import training_inputs as checks

    if getattr(checkpoint_utils.verify_checkpoint_directory, "_longformer_patched", False):
        return

    def verify_checkpoint_directory(save_dir):
        checks.claim_save_dir(save_dir)

    original_load = checkpoint_utils.load_checkpoint

    def load_checkpoint(cfg, trainer, **kwargs):
        result = original_load(cfg, trainer, **kwargs)
        if trainer.data_parallel_rank == 0:  # the inputs are accepted: the run may write now
            checks.create_save_dir(cfg.save_dir)
        return result

    original_call_main = distributed_utils.call_main

    def call_main(cfg, main, **kwargs):
        try:
            return original_call_main(cfg, main, **kwargs)
        finally:
            checks.release_save_dir()

    verify_checkpoint_directory._longformer_patched = True
    checkpoint_utils.verify_checkpoint_directory = verify_checkpoint_directory
    checkpoint_utils.load_checkpoint = load_checkpoint
    distributed_utils.call_main = call_main
    atexit.register(checks.release_save_dir)


def _inputs_checked_where_fairseq_reads_them() -> None:
    """fairseq reads a run's data, flags and restore file without checking them.

    Fails without it: a missing split ends in ``FileNotFoundError: Dataset not found``, an empty
    one in ``StopIteration``, a truncated ``.bin`` in numpy's mmap error, binaries holding ids the
    dictionary lacks in ``IndexError: index out of range in self``; ``--fp16`` on CPU in an
    ``AssertionError``; a dropout of 1.5 trains; ``--restore-file``/``--finetune-from-model`` of
    other sizes in ``Cannot load model parameters ... please ensure that the architectures match``
    (naming no flag), and one of another dictionary trains silently on scrambled ids. With it,
    each is one line from ``training_inputs`` before anything is written: the task's
    ``load_dataset`` and ``build_model`` (wrapped per task in ``setup_task``), the Trainer's
    construction and its ``load_checkpoint``. ``--allow-dictionary-change`` joins every fairseq
    CLI's parser (beside ``--trust-checkpoint``).
    """
    from fairseq import options, tasks
    from fairseq.trainer import Trainer

    from . import training_inputs as checks
    from .models.vocabulary import TOKEN_ROW_KEYS

    if getattr(tasks.setup_task, "_longformer_patched", False):
        return
    original_setup = tasks.setup_task

    def setup_task(cfg, **kwargs):
        task = original_setup(cfg, **kwargs)
        data, load, build = getattr(cfg, "data", None), task.load_dataset, task.build_model

        def load_dataset(split, *args, **more):
            if isinstance(data, str) and data:
                try:
                    dictionary = task.source_dictionary
                except (NotImplementedError, AttributeError):
                    dictionary = None
                hint = ("give a data folder with a train split" if split == "train" else
                        "pass --disable-validation (or another --valid-subset / --gen-subset)")
                checks.check_split(data, split, dictionary, hint)
            return load(split, *args, **more)

        def build_model(model_cfg, *args, **more):
            checks.check_model_flags(model_cfg)
            return build(model_cfg, *args, **more)

        task.load_dataset, task.build_model = load_dataset, build_model
        return task

    original_init = Trainer.__init__

    def __init__(self, cfg, *args, **kwargs):
        checks.check_precision(cfg.common, torch.cuda.is_available())
        original_init(self, cfg, *args, **kwargs)

    original_restore = Trainer.load_checkpoint

    def load_checkpoint(self, filename, *args, **kwargs):
        from .checkpoints import checkpoints_trusted, load_checkpoint as load_as_data

        finetune = self.cfg.checkpoint.finetune_from_model
        flag = ("--finetune-from-model" if finetune and os.path.abspath(finetune) == os.path.abspath(filename)
                else "--restore-file")
        data = getattr(self.cfg.task, "data", None)
        move, rows, fresh = None, [], []
        if os.path.isfile(filename) and isinstance(data, str):
            checks.check_restore_dictionary(filename, data, checks.dictionary_change_allowed(), flag)
            move = checks.mask_row_move(filename, data, getattr(self.task, "source_dictionary", None))
        if move is not None:
            named = dict(self.get_model().named_parameters(remove_duplicate=True))  # tied rows once
            rows = [named[key] for key in TOKEN_ROW_KEYS if key in named]
            fresh = [row[move[0]].detach().clone() for row in rows]
        try:
            extra_state = original_restore(self, filename, *args, **kwargs)
            if move is not None:
                checks.move_rows(rows, move, fresh)
            return extra_state
        except Exception as error:
            if not str(error).startswith("Cannot load model parameters"):
                raise
            state = load_as_data(filename, trust=checkpoints_trusted(), mmap=True)
            stored = state["cfg"]["model"] if state.get("cfg") else state.get("args")
            raise checks.name_architecture_mismatch(filename, {"model": stored}, self.cfg.model, flag,
                                                    str(error.__context__ or "")) from None

    original_parse = options.parse_args_and_arch

    def parse_args_and_arch(parser, *args, **kwargs):
        if checks.ALLOW_DICTIONARY_CHANGE not in parser._option_string_actions:
            parser.add_argument(checks.ALLOW_DICTIONARY_CHANGE, action="store_true",
                                help="restore a checkpoint onto data whose dict.txt appends symbols to the "
                                     "checkpoint's (their rows start fresh)")
        parsed = original_parse(parser, *args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        checks.allow_dictionary_change(bool(getattr(namespace, "allow_dictionary_change", False)))
        return parsed

    setup_task._longformer_patched = True
    tasks.setup_task = setup_task
    Trainer.__init__ = __init__
    Trainer.load_checkpoint = load_checkpoint
    options.parse_args_and_arch = parse_args_and_arch


def _training_failures_in_one_line() -> None:
    """What fails while fairseq trains, told as a traceback, after writing into the save dir.

    Fails without it: a diverging run (NaN/inf loss or gradient) writes a ``crash.pt`` of the
    model's size into the save dir, re-runs the step under fairseq's NanDetector (which itself can
    die with ``StopIteration``) and ends in ``FloatingPointError``; a full or read-only disk under
    a checkpoint save is retried three times 2.5 s apart, then leaves ``checkpoint_*.pt.tmp`` and
    a traceback. With it: no crash.pt; the divergence is one line with its update, cause and the
    flags to try; a disk error is one line naming the file and the fix, with no retry and no
    temporary left (``training_inputs.diverged``, ``disk_refusal``).
    """
    from fairseq import checkpoint_utils
    from fairseq.trainer import Trainer

    from . import training_inputs as checks

    if getattr(Trainer.train_step, "_longformer_patched", False):
        return
    logger = logging.getLogger("fairseq_longformer.compat")
    original_save = checkpoint_utils.save_checkpoint

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        try:
            return original_save(cfg, trainer, epoch_itr, val_loss)
        except OSError as error:  # a copy onto checkpoint_last.pt (atomic_copy removes its temporary)
            code = checks.disk_error(error)
            if code is None:
                raise
            raise checks.disk_refusal(error.filename or cfg.save_dir, code) from None

    original_write = checkpoint_utils._torch_persistent_save

    def _torch_persistent_save(obj, f):
        if isinstance(f, str):
            return original_write(obj, f)
        try:
            return torch.save(obj, f)
        except Exception as error:
            code = checks.disk_error(error)
            if code is None:
                return original_write(obj, f)  # fairseq's retries, for other failures
            name = getattr(f, "name", None)
            if not isinstance(name, str):
                raise
            checks.remove_partial([name])  # fairseq's NAME.tmp
            raise checks.disk_refusal(name[:-len(".tmp")] if name.endswith(".tmp") else name, code) from None

    original_write_trainer = Trainer.save_checkpoint

    def save_trainer_checkpoint(self, filename, extra_state):
        if os.path.basename(filename) == "crash.pt":  # fairseq's dump of a failing step, among the user's files
            logger.warning("not writing %s (the error below says what failed)", filename)
            return
        return original_write_trainer(self, filename, extra_state)

    original_step = Trainer.train_step

    def train_step(self, samples, *args, **kwargs):
        try:
            return original_step(self, samples, *args, **kwargs)
        except Exception as error:
            # fairseq re-runs the step under its NanDetector, which can itself fail (StopIteration
            # on a module whose output holds no tensor): the FloatingPointError is then the context
            cause = error if isinstance(error, FloatingPointError) else error.__context__
            if not isinstance(cause, FloatingPointError):
                raise
            raise checks.diverged(cause, self.get_num_updates(), self.get_lr(),
                                  bool(getattr(self.cfg.common, "fp16", False))) from None

    train_step._longformer_patched = True
    checkpoint_utils.save_checkpoint = save_checkpoint
    checkpoint_utils._torch_persistent_save = _torch_persistent_save
    Trainer.save_checkpoint = save_trainer_checkpoint
    Trainer.train_step = train_step


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


def _quiet_unactionable_warnings() -> None:
    """fairseq-train prints a dozen hydra deprecation warnings, a pin_memory warning and an
    autocast FutureWarning on every run (see ``_UNACTIONABLE_WARNINGS``); they bury the lines a
    user needs. Each is ignored by its exact message; nothing else is silenced."""
    for category, message in _UNACTIONABLE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def apply() -> None:
    _numpy_removed_aliases()
    _torch_load_weights_only()
    _torchrun_on_cpu()
    _atomic_checkpoint_copies()
    _resume_past_a_broken_last_checkpoint()
    _keep_the_last_short_batch()
    _per_group_learning_rates()
    _bf16_without_a_tpu()
    _bf16_inference()
    _fp16_overflow_on_cpu()
    _one_run_per_save_dir()
    _inputs_checked_where_fairseq_reads_them()
    _training_failures_in_one_line()
    _quiet_unactionable_warnings()


apply()
