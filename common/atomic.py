"""Writing files so that no reader, and no later run, ever sees half of one.

One scheme for every writer of the project (the RoBERTa converter, the Hugging Face export and
import, the preprocessing pipeline, the plugin runtime's checkpoint copies): write the new content under a
temporary name in the destination's own folder, flush it to disk, then move it onto its final name
with one ``os.replace`` (a rename: atomic on POSIX within one file system). A name then holds
either its previous complete content or the new one, also after a crash or a SIGKILL; a run killed
before the move leaves only a temporary that the next run removes or ignores.

  * ``publish(moves)``: flush every source, then rename them in the order given: put the file
    whose presence means "complete" (``model.pt``, a manifest) last.
  * ``atomic_files(folder, names)``: temporary paths (``.<name>.<random>.tmp``) for the named
    files; at a normal exit they are published in that order, on an error none is and the
    temporaries are removed.
  * ``atomic_copy(src, dst)``: a copy that replaces ``dst`` whole or not at all.
  * ``staged_folder(out_dir, overwrite, inputs)``: a whole folder built next to ``out_dir`` and
    renamed into place; an existing ``out_dir`` is replaced as a whole (no stale file of an earlier
    run survives), and only when it holds ``MARKER`` (a folder this project wrote) and is neither
    an input, inside one nor holding one. The checks hold at the rename, not only on entry: a
    folder another writer published meanwhile is never replaced without --overwrite.

Temporary names are unique (``mkstemp``/``mkdtemp``) and each is held under an ``flock`` by its
writer while it lives; what a killed run left (the lock is released when a process dies) is
removed, with a warning, by the next writer of the same name (``sweep_stale``).

``hold_folder(folder)``: the same flock on a whole folder, held by a training for its life.

A staged folder gets the permissions the umask gives an ordinary folder and its files (``mkdtemp``
makes a 0700 folder, safetensors 0600 files).
"""
import contextlib
import errno
import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterable, Iterator, Sequence, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]

logger = logging.getLogger(__name__)

# Written into every folder the tools publish: --overwrite replaces only a folder holding it.
MARKER = ".written-by-fairseq-longformer"


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def usual_permissions(path: PathLike) -> None:
    """Give ``path`` (and, for a folder, everything in it) the umask's permissions."""
    umask, path = _umask(), Path(path)
    for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~umask)


def fsync(path: PathLike) -> None:
    """Flush a file, or a folder's entries, to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(moves: Iterable[Tuple[PathLike, PathLike]]) -> None:
    """Rename each complete ``src`` onto its ``dst``, in the order given, after flushing every
    ``src`` to disk (so a crash after a rename cannot leave an empty or partial file under the
    final name); the destination folders are flushed last (the renames themselves)."""
    moves = [(os.fspath(src), os.fspath(dst)) for src, dst in moves]
    for src, _ in moves:
        fsync(src)
    for src, dst in moves:
        os.replace(src, dst)
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(dst)) for _, dst in moves):
        fsync(folder)


def _hold(path: PathLike) -> int:
    """Open ``path`` (a file or a folder) and take its flock: held until the fd is closed, or the
    process dies. Raises BlockingIOError when another live process holds it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def hold_folder(folder: PathLike) -> int:
    """Hold ``folder``'s own flock for as long as the returned fd is open: one writer per folder
    (a training's --save-dir), with no lock file written; the kernel lets it go when the holder
    dies, so a killed run never leaves a stale lock. BlockingIOError when a live process holds it."""
    return _hold(folder)


def sweep_stale(folder: PathLike, prefix: str, suffixes: Sequence[str]) -> None:
    """Remove ``folder/<prefix>*<suffix>`` left by killed runs (their flock is free), with a
    warning naming each; temporaries of live writers (flock held) are left alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if not (path.name.startswith(prefix) and path.name.endswith(tuple(suffixes))):
            continue
        try:
            fd = _hold(path)
        except (BlockingIOError, FileNotFoundError, PermissionError):
            continue
        try:
            logger.warning("removing %s, left by an earlier run that was killed", path)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_files(folder: PathLike, names: Sequence[str]) -> Iterator[Dict[str, Path]]:
    """Yield {name: temporary path in ``folder``} to write; at a normal exit every file is
    published onto ``folder/name`` in the order of ``names`` (the completion marker last); on
    an error none is, and the temporaries are removed. ``folder`` must exist."""
    folder = Path(folder)
    temps, held = {}, []
    try:
        for name in names:
            # unique per writer: two writers of one name never write into the same temporary
            sweep_stale(folder, f".{name}.", [".tmp"])
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            fcntl.flock(fd, fcntl.LOCK_EX)
            held.append(fd)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600
            temps[name] = Path(tmp)
        yield temps
        publish((temps[name], folder / name) for name in names)
    finally:
        for tmp in temps.values():
            if tmp.exists():
                tmp.unlink()
        for fd in held:
            os.close(fd)


def atomic_copy(src: PathLike, dst: PathLike) -> None:
    """Copy ``src`` to ``dst`` so that ``dst`` is the old file or the whole new one, never a part."""
    dst = Path(dst)
    with atomic_files(dst.parent, [dst.name]) as temps:
        shutil.copyfile(src, temps[dst.name])


def _overlap(out_dir: Path, inputs: Iterable[PathLike]):
    """The first input that ``out_dir`` is, is inside of, or holds; else None."""
    for item in inputs:
        if item is None:
            continue
        source = Path(item).resolve()
        if out_dir == source or out_dir.is_relative_to(source) or source.is_relative_to(out_dir):
            return item
    return None


def check_output_dir(out_dir: PathLike, overwrite: bool = False, inputs: Iterable[PathLike] = ()) -> Path:
    """Raise FileExistsError unless ``out_dir`` is absent, an empty folder, or (with
    ``overwrite``) a folder this project wrote (``MARKER``); ValueError when it is, holds or is
    inside one of ``inputs`` (--overwrite would delete them)."""
    out_dir = Path(out_dir).absolute()
    if out_dir.is_symlink():  # the rename at the end would replace the link, not write where it points
        raise FileExistsError(f"output {str(out_dir)!r} is a symbolic link (to {os.readlink(out_dir)!r}): give the "
                              "folder itself, or remove the link")
    source = _overlap(out_dir.resolve(), inputs)
    if source is not None:
        raise ValueError(f"output {str(out_dir)!r} is, holds or is inside the input {str(source)!r}; "
                         "writing there would replace the input: choose another output folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output {str(out_dir)!r} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"output folder {str(out_dir)!r} exists and is not empty (pass --overwrite "
                                  "to replace it)")
        if not (out_dir / MARKER).is_file():
            raise FileExistsError(f"output folder {str(out_dir)!r} was not written by fairseq-longformer (no "
                                  f"{MARKER} in it), so --overwrite will not delete it: choose another folder, "
                                  "or empty it yourself")
    _check_creatable(out_dir)
    return out_dir


def _check_creatable(out_dir: Path) -> None:
    """Create and remove a temporary folder where ``out_dir``'s staging folder will be made (its
    nearest existing ancestor): a folder the user may not write in, or a read-only disk, is
    refused before any work, as an OSError naming ``out_dir`` (``os.access`` says yes to root
    on a read-only mount)."""
    parent = out_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
    try:
        os.rmdir(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".probe", dir=parent))
    except OSError as error:
        raise type(error)(error.errno, f"{error.strerror} (cannot create it in {str(parent)!r})",
                          str(out_dir)) from None


def _publish_folder(tmp: Path, out_dir: Path, overwrite: bool) -> None:
    """Rename ``tmp`` onto ``out_dir`` without replacing anything the checks did not pass: a
    non-empty folder is never renamed over (the kernel refuses), and with ``overwrite`` the folder
    moved aside is checked for ``MARKER`` after the move (so it is the one checked), and moved
    back when it lacks it."""
    if overwrite and out_dir.is_dir():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
        fd = _hold(old)  # a sweeper must not take it while we move it
        try:
            os.rename(out_dir, old / "folder")
        except OSError:
            os.close(fd)
            os.rmdir(old)
            raise
        try:
            if any((old / "folder").iterdir()) and not (old / "folder" / MARKER).is_file():
                os.rename(old / "folder", out_dir)
                raise FileExistsError(f"output folder {str(out_dir)!r} was replaced by another writer with a folder "
                                      "fairseq-longformer did not write; left it as it is")
            _rename_into_place(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            os.close(fd)
    else:
        _rename_into_place(tmp, out_dir)


def _rename_into_place(tmp: Path, out_dir: Path) -> None:
    try:
        publish([(tmp, out_dir)])  # os.replace of a folder: only onto an absent or empty one
    except OSError as error:
        raise FileExistsError(f"output folder {str(out_dir)!r} was written by another run meanwhile; left it "
                              f"as it is ({error.strerror})") from None


@contextlib.contextmanager
def staged_folder(out_dir: PathLike, overwrite: bool = False, inputs: Iterable[PathLike] = ()) -> Iterator[Path]:
    """Yield a temporary folder next to ``out_dir``; at a normal exit it becomes ``out_dir`` (one
    rename; an existing folder is moved aside first and then deleted), on an error it is removed
    and ``out_dir`` is untouched (or still absent). An existing empty ``out_dir`` is replaced; a
    non-empty one only with ``overwrite`` and when this project wrote it (``check_output_dir``);
    ``inputs`` are never replaced. Stale staging folders of killed runs are swept first."""
    inputs = list(inputs)
    out_dir = check_output_dir(out_dir, overwrite, inputs)
    created = [folder for folder in out_dir.parents if not folder.exists()]  # deepest first
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(out_dir.parent, f".{out_dir.name}.", [".partial", ".old"])
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    except OSError as error:
        _remove_empty(created)
        raise _naming(error, out_dir) from None
    fd = _hold(tmp)  # the flock says "alive" to other runs' sweep_stale
    try:
        yield tmp
        (tmp / MARKER).write_text("written by fairseq-longformer: --overwrite may replace this folder\n")
        usual_permissions(tmp)
        for path in tmp.rglob("*"):
            if path.is_file():
                fsync(path)
        _publish_folder(tmp, out_dir, overwrite)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)  # a failed run leaves no empty parent folder behind either
        if isinstance(error, OSError) and error.filename is None and error.errno in _DISK_FULL:
            raise _naming(error, out_dir) from error
        raise
    finally:
        os.close(fd)


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _naming(error: OSError, out_dir: Path) -> OSError:
    """``error`` as the same kind of OSError naming ``out_dir`` (the user's path), not the
    staging folder's temporary name or none."""
    if error.errno is None:
        return error
    return type(error)(error.errno, error.strerror or os.strerror(error.errno), str(out_dir))


def _remove_empty(folders: Sequence[Path]) -> None:
    """Remove each folder of ``folders`` (deepest first) that is empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
