"""fairseq's checkpoint files, written and resumed so that a run killed at any moment can start again.

Two patches of ``fairseq.checkpoint_utils`` (installed by ``runtime.apply``): the copies of a fresh
checkpoint onto its other names are atomic (``atomic_checkpoint_copies``), and a broken
``checkpoint_last.pt`` is skipped for the newest intact checkpoint of the folder
(``resume_past_a_broken_last_checkpoint``).
"""
import logging
import os
import zipfile

from fairseq import checkpoint_utils
from fairseq.file_io import PathManager

from longformer_common.atomic import atomic_copy
from .checkpoints import damage
from .errors import UserInputError

logger = logging.getLogger(__name__)

def atomic_checkpoint_copies() -> None:
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


def resume_past_a_broken_last_checkpoint() -> None:
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
    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_longformer_patched", False):
        return

    def load_checkpoint(cfg, trainer, **kwargs):
        suffix = getattr(trainer, "checkpoint_suffix", "") or ""
        last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        if cfg.restore_file != "checkpoint_last.pt" or not os.path.exists(last) or is_intact_checkpoint(last):
            return original(cfg, trainer, **kwargs)
        replacement = newest_intact_checkpoint(cfg.save_dir, skip=last)
        if replacement is None:
            raise UserInputError(  # one line (errors.install_excepthook), not a traceback
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
