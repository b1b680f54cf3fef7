"""One training run per ``--save-dir``, made only once the run's inputs are accepted.

fairseq-train makes ``--save-dir`` (and writes a ``dummy`` file into it) before reading anything,
and never locks it. Here: one run per folder, held by the folder's own flock for the run's whole
life (``atomic.hold_folder``: the kernel releases it when the process dies, so a killed run leaves
no stale lock); a folder that does not exist is created only once the inputs are accepted (after
the restore and the training data loaded) and removed again at exit if it stayed empty; an
unwritable or read-only one is refused first. Only the master rank takes it (the rank that
writes). Each refusal is a ``UserInputError`` (one line: the input, the rule, the fix).
"""
import atexit
import os
import tempfile
from pathlib import Path

import torch.distributed
from fairseq import checkpoint_utils
from fairseq.distributed import utils as distributed_utils

from longformer_common.atomic import hold_folder
from .errors import UserInputError

_held = {"fd": None, "path": None, "created": False}


def _probe_writable(folder: Path, what: str) -> None:
    """Create and remove a temporary in ``folder``: the test a read-only disk, a full quota or a
    folder of someone else fails (``os.access`` says yes to root on a read-only mount)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".longformer-probe-", dir=folder))
    except OSError as error:
        raise UserInputError(f"--save-dir {what}: cannot write in {folder} ({error.strerror}); choose a --save-dir "
                             "on a writable disk") from None


def _take_lock(folder: Path, what: str) -> None:
    if _held["fd"] is not None:
        return
    try:
        _held["fd"] = hold_folder(folder)
    except BlockingIOError:
        raise UserInputError(f"--save-dir {what} is in use by another training run (it holds the folder's lock); "
                             "wait for that run to end, or choose another --save-dir") from None
    _held["path"] = folder.absolute()  # hydra changes the working folder between here and the exit


def _check_torchrun() -> None:
    """``torchrun --nproc_per_node N fairseq-train ...`` without ``--distributed-world-size N``:
    fairseq reads torchrun's WORLD_SIZE/RANK only when that flag is above 1, so each of the N
    processes trains alone (no process group is made), all into one --save-dir. Refused on every
    process before anything is written, naming the flag to pass."""
    world = os.environ.get("WORLD_SIZE", "")
    if not ({"RANK", "LOCAL_RANK"} <= set(os.environ) and world.isdigit() and int(world) > 1):
        return
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return  # fairseq joined torchrun's process group: one training
    raise UserInputError(f"torchrun started this process as one of WORLD_SIZE={world}, but fairseq-train runs with "
                         f"--distributed-world-size 1, so each process would train alone into the same --save-dir: "
                         f"pass --distributed-world-size {world} (torchrun's --nproc_per_node x --nnodes)")


def claim_save_dir(save_dir: str) -> None:
    """fairseq's ``verify_checkpoint_directory`` (master rank, at the start of main), writing
    nothing: an existing folder is locked and probed; an absent one is only checked to be
    creatable (its nearest existing parent is a writable folder). A torchrun process that
    fairseq runs alone is refused first (``_check_torchrun``)."""
    _check_torchrun()
    folder = Path(save_dir)
    if folder.exists() and not folder.is_dir():
        raise UserInputError(f"--save-dir {save_dir} exists and is not a folder; choose another --save-dir")
    if folder.is_dir():
        _take_lock(folder, save_dir)
        _probe_writable(folder, save_dir)
        return
    parent = folder.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserInputError(f"--save-dir {save_dir}: {parent} is a file, not a folder; choose another --save-dir")
    _probe_writable(parent, save_dir)


def create_save_dir(save_dir: str) -> None:
    """Once the inputs are accepted (master rank): make the folder if needed and hold its lock."""
    folder = Path(save_dir)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        _held["created"] = True
    _take_lock(folder, save_dir)


def release_save_dir() -> None:
    """At the run's end, whatever the end: the lock is let go, and a folder this run created and
    left empty is removed (a refused or failed run leaves nothing)."""
    fd, folder, created = _held["fd"], _held["path"], _held["created"]
    _held.update(fd=None, path=None, created=False)
    if fd is not None:
        os.close(fd)
    if created and folder is not None:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass


def one_run_per_save_dir() -> None:
    """fairseq-train makes ``--save-dir`` (and writes a ``dummy`` file into it) before reading
    anything, and never locks it.

    Fails without it: a run refused for a bad input leaves an empty save dir behind (the bad-input
    table pre-created its folder, which hid it); two runs started into the same folder both finish
    with exit 0, every checkpoint of the first replaced by the second's. With it
    (the functions above): at the start the folder is only checked (writable, or creatable), and
    locked if it exists; it is made, and held by the run's flock until the process ends, once the
    restore and the training data are loaded; a second run is refused in one line; a folder the run
    made and left empty is removed at exit. Only the master rank, which writes, takes it. The lock
    is the folder's own flock (``atomic.hold_folder``): a killed run's lock is gone with it.
    fairseq-hydra-train binds ``call_main`` before the plugin loads: the release runs at exit there.
    """
    if getattr(checkpoint_utils.verify_checkpoint_directory, "_longformer_patched", False):
        return

    def verify_checkpoint_directory(save_dir):
        claim_save_dir(save_dir)

    original_load = checkpoint_utils.load_checkpoint

    def load_checkpoint(cfg, trainer, **kwargs):
        result = original_load(cfg, trainer, **kwargs)
        if trainer.data_parallel_rank == 0:  # the inputs are accepted: the run may write now
            create_save_dir(cfg.save_dir)
        return result

    original_call_main = distributed_utils.call_main

    def call_main(cfg, main, **kwargs):
        try:
            return original_call_main(cfg, main, **kwargs)
        finally:
            release_save_dir()

    verify_checkpoint_directory._longformer_patched = True
    checkpoint_utils.verify_checkpoint_directory = verify_checkpoint_directory
    checkpoint_utils.load_checkpoint = load_checkpoint
    distributed_utils.call_main = call_main
    atexit.register(release_save_dir)
