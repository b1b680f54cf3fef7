"""The plugin's training features (``fairseq_longformer.training``) installed into fairseq.

The logic lives with the training code; this module only puts it in fairseq's place, marked
``_longformer_patched`` so that a second ``runtime.apply`` changes nothing.
"""
import logging

from fairseq import optim
from fairseq.data import data_utils
from fairseq.optim.fairseq_optimizer import FairseqOptimizer
from fairseq.optim.fp16_optimizer import FP16Optimizer
from fairseq.trainer import Trainer

from longformer_common import threads
from ..training import free_core_threads, lr_groups
from ..training.short_batches import keeping_the_last_short_batch

logger = logging.getLogger(__name__)


def keep_the_last_short_batch() -> None:
    """``data_utils.batch_by_size`` drops the last batch that is not a multiple of
    ``--required-batch-size-multiple``: ``training.short_batches`` gives it back."""
    if getattr(data_utils.batch_by_size, "_longformer_patched", False):
        return
    batch_by_size = keeping_the_last_short_batch(data_utils.batch_by_size)
    batch_by_size._longformer_patched = True
    data_utils.batch_by_size = batch_by_size


def per_group_learning_rates() -> None:
    """``optim.build_optimizer`` and ``FairseqOptimizer.set_lr`` train every parameter at the one
    ``--lr`` and decay every one, biases and LayerNorm included: ``training.lr_groups`` gives each
    ``lr_scale`` its group and rate, and biases and LayerNorm parameters weight decay 0. The fp16
    optimizer, which would fold the groups into one tensor, keeps them unflattened (what its
    ``--fp16-no-flatten-grads`` branch does), saying so in one log line."""
    if getattr(optim.build_optimizer, "_longformer_patched", False):
        return
    build_optimizer = lr_groups.grouping_by_lr_scale_and_decay(optim.build_optimizer)
    fp16_build = FP16Optimizer.build_optimizer.__func__

    def build_fp16(cls, cfg, params, **kwargs):
        params = list(params)
        if not lr_groups.fp16_folds_groups(cfg, params):
            return fp16_build(cls, cfg, params, **kwargs)
        logger.info(lr_groups.FP16_KEEPS_GROUPS)
        fp32_params = cls.build_fp32_params(cfg.optimizer, params, flatten=False)
        return cls(cfg, params, optim.build_optimizer(cfg.optimizer, fp32_params), fp32_params, **kwargs)

    build_optimizer._longformer_patched = True
    optim.build_optimizer = build_optimizer
    FairseqOptimizer.set_lr = lr_groups.set_lr
    FP16Optimizer.build_optimizer = classmethod(build_fp16)


def threads_following_free_cores(environ=None) -> None:
    """fairseq trains with one thread count throughout: beside another busy process every
    parallel region waits for the thread that shares a core (docs/cpu.md). Under
    ``LONGFORMER_THREADS=auto`` (and no OMP_NUM_THREADS: ``longformer_common.threads``) the count
    is set from the free cores now and ``Trainer.set_num_updates`` re-checks it every
    ``free_core_threads.CHECK_EVERY`` updates. Marked ``_longformer_threads`` (not
    ``_longformer_patched``, which a later wrapper of the same Trainer would read as its own)."""
    if not threads.choose(environ=environ).auto or getattr(Trainer.set_num_updates, "_longformer_threads", False):
        return
    follower = free_core_threads.ThreadsFollowingFreeCores()
    logger.info(f"threads: {follower.start()} (LONGFORMER_THREADS=auto: the free cores, at most {follower.most}, "
                f"re-checked every {follower.every} updates)")
    set_num_updates = free_core_threads.following_free_cores(Trainer.set_num_updates, follower)
    set_num_updates._longformer_patched = set_num_updates._longformer_threads = True
    Trainer.set_num_updates = set_num_updates
