"""Writing files so that no reader, and no later run, ever sees half of one.

One scheme for every writer of the project (the RoBERTa converter, the Hugging Face export and
import, the preprocessing pipeline, compat's checkpoint copies): write the new content under a
temporary name in the destination's own folder, flush it to disk, then move it onto its final name
with one ``os.replace`` (a rename: atomic on POSIX within one file system). A name then holds
either its previous complete content or the new one, also after a crash or a SIGKILL; a run killed
before the move leaves only a temporary that the next run removes or ignores.

  * ``publish(moves)``: flush every source, then rename them in the order given: put the file
    whose presence means "complete" (``model.pt``, a manifest) last.
  * ``atomic_files(folder, names)``: temporary paths (``.<name>.tmp``) for the named files; at a
    normal exit they are published in that order, on an error none is and the temporaries are
    removed. A temporary left by a killed run is overwritten by the next one.
  * ``atomic_copy(src, dst)``: a copy that replaces ``dst`` whole or not at all.
  * ``staged_folder(out_dir)``: a whole folder built next to ``out_dir`` and renamed into place;
    an existing ``out_dir`` is replaced as a whole (no stale file of an earlier run survives).

A staged folder gets the permissions the umask gives an ordinary folder and its files (``mkdtemp``
makes a 0700 folder, safetensors 0600 files).
"""
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterable, Iterator, Sequence, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]


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


@contextlib.contextmanager
def atomic_files(folder: PathLike, names: Sequence[str]) -> Iterator[Dict[str, Path]]:
    """Yield {name: temporary path in ``folder``} to write; at a normal exit every file is
    published onto ``folder/name`` in the order of ``names`` (the completion marker last); on
    an error none is, and the temporaries are removed. ``folder`` must exist."""
    folder = Path(folder)
    # One fixed temporary name per file: the temporary a killed run left behind is overwritten by
    # the next one, never accumulated (checkpoints are large). One writer per file is assumed.
    temps = {name: folder / f".{name}.tmp" for name in names}
    try:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        yield temps
        publish((temps[name], folder / name) for name in names)
    finally:
        for tmp in temps.values():
            if tmp.exists():
                tmp.unlink()


def atomic_copy(src: PathLike, dst: PathLike) -> None:
    """Copy ``src`` to ``dst`` so that ``dst`` is the old file or the whole new one, never a part."""
    dst = Path(dst)
    with atomic_files(dst.parent, [dst.name]) as temps:
        shutil.copyfile(src, temps[dst.name])


def check_output_dir(out_dir: PathLike, overwrite: bool = False) -> Path:
    """Raise FileExistsError unless ``out_dir`` is absent, an empty folder, or ``overwrite``."""
    out_dir = Path(out_dir).absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output {str(out_dir)!r} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"output folder {str(out_dir)!r} exists and is not empty (pass --overwrite "
                              "to replace it)")
    return out_dir


@contextlib.contextmanager
def staged_folder(out_dir: PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder next to ``out_dir``; at a normal exit it becomes ``out_dir`` (one
    rename; an existing folder is moved aside first and then deleted), on an error it is removed
    and ``out_dir`` is untouched (or still absent). An existing empty ``out_dir`` is replaced; a
    non-empty one only with ``overwrite``."""
    out_dir = check_output_dir(out_dir, overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    try:
        yield tmp
        usual_permissions(tmp)
        for path in tmp.rglob("*"):
            if path.is_file():
                fsync(path)
        if out_dir.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            os.rmdir(old)
            os.rename(out_dir, old)
            publish([(tmp, out_dir)])
            shutil.rmtree(old, ignore_errors=True)
        else:
            publish([(tmp, out_dir)])
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
