"""What goes wrong while fairseq trains, said in one line, with nothing left in the save dir.

A NaN/inf loss or gradient (``diverged``) and a full or read-only disk under a checkpoint save
(``disk_error``, ``disk_refusal``) each become one ``UserInputError`` line naming the cause and the
fix; ``training_failures_in_one_line`` (installed by ``runtime.apply``) raises them from fairseq's
own steps.
"""
import errno
import logging
import os
from typing import Optional, Sequence

import torch
from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from .errors import UserInputError

logger = logging.getLogger(__name__)

def diverged(error: Exception, num_updates: int, lr: Optional[float], fp16: bool) -> UserInputError:
    """A FloatingPointError of fairseq's trainer (NaN/inf gradients, loss scale at its minimum)."""
    cause = str(error).strip().splitlines()[0] if str(error).strip() else "a NaN or inf value"
    if "loss scale" in cause:
        fix = "the fp16 loss scale hit its minimum: train with --bf16, or lower --lr, or add --clip-norm 1.0"
    else:
        fix = (f"lower --lr (now {lr:g})" if lr is not None else "lower --lr") + \
              ", add --clip-norm 1.0 or a warmup (--warmup-updates)" + (", or use --bf16 instead of --fp16" if fp16 else "")
    return UserInputError(f"training diverged at update {num_updates + 1}: {cause} (a NaN/inf loss or gradient); {fix}")

DISK_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EFBIG)


def disk_error(error: BaseException) -> Optional[int]:
    """The errno of a full, read-only or forbidden disk behind ``error`` (torch's zip writer
    reports an OSError of its file object as a RuntimeError with the message), else None."""
    for item in (error, error.__cause__, error.__context__):
        if isinstance(item, OSError) and item.errno in DISK_ERRORS:
            return item.errno
    text = str(error)
    for code in DISK_ERRORS:
        if os.strerror(code) in text:
            return code
    return None


def disk_refusal(filename: str, code: int) -> UserInputError:
    folder = os.path.dirname(os.path.abspath(filename))
    return UserInputError(f"cannot write the checkpoint {filename}: {os.strerror(code)} ({errno.errorcode[code]}); "
                          f"free space in {folder} or choose a --save-dir on another disk (the checkpoints "
                          "written before are intact)")


def remove_partial(paths: Sequence[str]) -> None:
    """Remove what a failed save left (fairseq writes ``name.tmp`` and renames it)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def training_failures_in_one_line() -> None:
    """What fails while fairseq trains, told as a traceback, after writing into the save dir.

    Fails without it: a diverging run (NaN/inf loss or gradient) writes a ``crash.pt`` of the
    model's size into the save dir, re-runs the step under fairseq's NanDetector (which itself can
    die with ``StopIteration``) and ends in ``FloatingPointError``; a full or read-only disk under
    a checkpoint save is retried three times 2.5 s apart, then leaves ``checkpoint_*.pt.tmp`` and
    a traceback. With it: no crash.pt; the divergence is one line with its update, cause and the
    flags to try; a disk error is one line naming the file and the fix, with no retry and no
    temporary left (``diverged``, ``disk_refusal``).
    """
    if getattr(Trainer.train_step, "_longformer_patched", False):
        return
    original_save = checkpoint_utils.save_checkpoint

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        try:
            return original_save(cfg, trainer, epoch_itr, val_loss)
        except OSError as error:  # a copy onto checkpoint_last.pt (atomic_copy removes its temporary)
            code = disk_error(error)
            if code is None:
                raise
            raise disk_refusal(error.filename or cfg.save_dir, code) from None

    original_write = checkpoint_utils._torch_persistent_save

    def _torch_persistent_save(obj, f):
        if isinstance(f, str):
            return original_write(obj, f)
        try:
            return torch.save(obj, f)
        except Exception as error:
            code = disk_error(error)
            if code is None:
                return original_write(obj, f)  # fairseq's retries, for other failures
            name = getattr(f, "name", None)
            if not isinstance(name, str):
                raise
            remove_partial([name])  # fairseq's NAME.tmp
            raise disk_refusal(name[:-len(".tmp")] if name.endswith(".tmp") else name, code) from None

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
            raise diverged(cause, self.get_num_updates(), self.get_lr(),
                           bool(getattr(self.cfg.common, "fp16", False))) from None

    train_step._longformer_patched = True
    checkpoint_utils.save_checkpoint = save_checkpoint
    checkpoint_utils._torch_persistent_save = _torch_persistent_save
    Trainer.save_checkpoint = save_trainer_checkpoint
    Trainer.train_step = train_step
