"""Simulated system states for the bad-input table (tests/integration/test_bad_inputs.py): each
``state(monkeypatch, world)`` makes the process meet what a user's system may answer (the tests
run as root, so permissions and full disks are simulated)."""
import errno
import io
import os
from pathlib import Path
from typing import Callable

import pytest
import torch


def _unwritable(monkeypatch: pytest.MonkeyPatch, folder: Path, code: int) -> None:
    """Creating anything inside ``folder`` fails with ``code``, as the kernel answers (OSError
    makes EACCES a PermissionError); tempfile's mkdtemp and mkstemp go through these too."""
    real_mkdir, real_open = os.mkdir, os.open
    inside = str(folder)

    def refuse(path):
        if os.path.abspath(os.fspath(path)).startswith(inside + os.sep):
            raise OSError(code, os.strerror(code), os.fspath(path))

    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: refuse(path) or real_mkdir(path, *a, **k))
    monkeypatch.setattr(os, "open", lambda path, flags, *a, **k: (refuse(path) if flags & os.O_CREAT else None)
                        or real_open(path, flags, *a, **k))


def read_only(monkeypatch: pytest.MonkeyPatch, world: Path) -> None:
    """world/ro is on a read-only disk."""
    _unwritable(monkeypatch, world / "ro", errno.EROFS)


def locked(monkeypatch: pytest.MonkeyPatch, world: Path) -> None:
    """world/locked is a folder the user may not write in (the tests run as root, who may)."""
    _unwritable(monkeypatch, world / "locked", errno.EACCES)


def _half_then_full(write: Callable, f) -> None:
    """Write half of what ``write(buffer)`` writes to ``f`` (a file object or a path), then ENOSPC."""
    buffer = io.BytesIO()
    write(buffer)
    half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
    f.write(half) if hasattr(f, "write") else Path(f).write_bytes(half)
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def disk_full(monkeypatch: pytest.MonkeyPatch, world: Path) -> None:
    """The disk fills up while a checkpoint is written: half of it lands, then ENOSPC."""
    real_save = torch.save
    monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: _half_then_full(
        lambda buffer: real_save(obj, buffer, *a, **k), f))


def onnx_disk_full(monkeypatch: pytest.MonkeyPatch, world: Path) -> None:
    """The disk fills up while the ONNX graph is written: half of it lands, then ENOSPC."""
    real_export = torch.onnx.export
    monkeypatch.setattr(torch.onnx, "export", lambda model, args, f, *a, **k: _half_then_full(
        lambda buffer: real_export(model, args, buffer, *a, **k), f))


def torchrun(monkeypatch: pytest.MonkeyPatch, world: Path) -> None:
    """``torchrun --nproc_per_node 2 fairseq-train ...``: the environment of its first process."""
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "2"),
                        ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29599")):
        monkeypatch.setenv(name, value)
