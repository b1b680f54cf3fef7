"""fairseq_longformer.atomic: a name holds its old content or the whole new one, never a part;
the completion marker is published last; nothing is left behind on success or on error."""
import os
import stat

import pytest

from fairseq_longformer.atomic import atomic_copy, atomic_files, staged_folder


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_files_publish_in_order_with_usual_permissions(tmp_path, monkeypatch):
    moved = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (moved.append(os.path.basename(dst)), real_replace(src, dst)))
    (tmp_path / "dict.txt").write_text("old")
    with atomic_files(tmp_path, ["dict.txt", "model.pt"]) as temps:
        temps["dict.txt"].write_text("new dict")
        temps["model.pt"].write_bytes(b"weights")
        assert not (tmp_path / "model.pt").exists() and (tmp_path / "dict.txt").read_text() == "old"
    assert moved == ["dict.txt", "model.pt"]  # the marker last
    assert (tmp_path / "dict.txt").read_text() == "new dict" and (tmp_path / "model.pt").read_bytes() == b"weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dict.txt", "model.pt"]
    umask = os.umask(0)
    os.umask(umask)
    assert _mode(tmp_path / "model.pt") == 0o666 & ~umask


def test_atomic_files_publish_nothing_on_an_error(tmp_path):
    (tmp_path / "dict.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_files(tmp_path, ["dict.txt", "model.pt"]) as temps:
            temps["dict.txt"].write_text("new dict")
            raise RuntimeError("disk full while writing model.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dict.txt"]
    assert (tmp_path / "dict.txt").read_text() == "old"


def test_atomic_copy_overwrites_a_temporary_a_killed_run_left(tmp_path):
    src = tmp_path / "checkpoint_1_10.pt"
    src.write_bytes(b"new" * 100)
    (tmp_path / ".checkpoint_last.pt.tmp").write_bytes(b"half")  # a copy killed half-way
    atomic_copy(src, tmp_path / "checkpoint_last.pt")
    assert (tmp_path / "checkpoint_last.pt").read_bytes() == b"new" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1_10.pt", "checkpoint_last.pt"]


def test_staged_folder_replaces_the_whole_folder_or_nothing(tmp_path):
    out = tmp_path / "hf"
    with staged_folder(out) as stage:
        (stage / "config.json").write_text("{}")
        (stage / "tokenizer.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "tokenizer.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert _mode(out) == 0o777 & ~umask  # not mkdtemp's 0700
    with pytest.raises(FileExistsError, match="--overwrite"):
        with staged_folder(out):
            pass
    with pytest.raises(RuntimeError):
        with staged_folder(out, overwrite=True) as stage:
            (stage / "config.json").write_text('{"new": 1}')
            raise RuntimeError("export failed")
    assert (out / "config.json").read_text() == "{}"
    with staged_folder(out, overwrite=True) as stage:
        (stage / "config.json").write_text('{"new": 1}')
    # replaced as a whole: no stale tokenizer of the earlier export survives
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no staging folder left
