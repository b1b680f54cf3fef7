"""longformer_common.atomic: a name holds its old content or the whole new one, never a part;
the completion marker is published last; nothing is left behind on success or on error."""
import os
import stat

import pytest

from longformer_common.atomic import MARKER, atomic_copy, atomic_files, staged_folder


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


def test_atomic_copy_sweeps_the_temporaries_killed_runs_left(tmp_path):
    src = tmp_path / "checkpoint_1_10.pt"
    src.write_bytes(b"new" * 100)
    (tmp_path / ".checkpoint_last.pt.tmp").write_bytes(b"half")  # a copy killed half-way (old name)
    (tmp_path / ".checkpoint_last.pt.k3x9_a.tmp").write_bytes(b"half")  # and with a unique name
    atomic_copy(src, tmp_path / "checkpoint_last.pt")
    assert (tmp_path / "checkpoint_last.pt").read_bytes() == b"new" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1_10.pt", "checkpoint_last.pt"]


def test_staged_folder_replaces_the_whole_folder_or_nothing(tmp_path):
    out = tmp_path / "hf"
    with staged_folder(out) as stage:
        (stage / "config.json").write_text("{}")
        (stage / "tokenizer.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "config.json", "tokenizer.json"]
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
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no staging folder left


def test_overwrite_refuses_inputs_and_folders_it_did_not_write(tmp_path):
    ckdir = tmp_path / "ckdir"
    ckdir.mkdir()
    (ckdir / "model.pt").write_bytes(b"weights")
    for out, inputs in ((ckdir, [ckdir / "model.pt"]), (ckdir / "sub", [ckdir]), (tmp_path, [ckdir])):
        with pytest.raises(ValueError, match="would replace the input"):
            with staged_folder(out, overwrite=True, inputs=inputs):
                pass
    with pytest.raises(FileExistsError, match="not written by fairseq-longformer"):
        with staged_folder(ckdir, overwrite=True):
            pass
    assert (ckdir / "model.pt").read_bytes() == b"weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckdir"]


def test_a_folder_published_meanwhile_is_never_replaced_without_overwrite(tmp_path):
    out = tmp_path / "hf"
    with pytest.raises(FileExistsError, match="another run meanwhile"):
        with staged_folder(out) as stage:
            (stage / "config.json").write_text("mine")
            out.mkdir()  # another writer publishes after our entry check
            (out / "config.json").write_text("theirs")
    assert (out / "config.json").read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_stale_staging_folders_are_swept_and_live_ones_kept(tmp_path, caplog):
    import fcntl

    stale = tmp_path / ".hf.abc123.partial"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x" * 100)
    (tmp_path / ".hf.def456.old").mkdir()
    live = tmp_path / ".hf.live99.partial"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a writer still at work
    try:
        with staged_folder(tmp_path / "hf") as stage:
            (stage / "config.json").write_text("{}")
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hf.live99.partial", "hf"]
    assert str(stale) in caplog.text and "killed" in caplog.text


def test_a_failed_staging_leaves_no_parent_folder_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError):
        with staged_folder(tmp_path / "kept" / "new" / "sub" / "out") as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("the export failed")
    assert sorted(os.listdir(tmp_path)) == ["kept"] and os.listdir(tmp_path / "kept") == []


def test_a_full_disk_is_reported_on_the_output_folder(tmp_path):
    import errno

    with pytest.raises(OSError) as raised:
        with staged_folder(tmp_path / "new" / "out"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a writer that names no file
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "new" / "out")
    assert os.listdir(tmp_path) == []


def test_output_links_are_refused_before_any_work(tmp_path):
    from longformer_common.atomic import check_output_dir

    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for name in ("dangling", "link"):
        with pytest.raises(FileExistsError, match="symbolic link"):
            check_output_dir(tmp_path / name)
    assert sorted(os.listdir(tmp_path)) == ["dangling", "link", "real"]


def test_an_unwritable_parent_is_refused_naming_the_output(tmp_path, monkeypatch):
    """mkdtemp's PermissionError in a folder the user may not write in names the output the user
    gave, before any work (the tests run as root: simulated)."""
    import errno
    import tempfile

    from longformer_common.atomic import check_output_dir

    def refuse(suffix=None, prefix=None, dir=None):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.path.join(dir, f"{prefix}xyz{suffix}"))

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with pytest.raises(PermissionError) as raised:
        check_output_dir(tmp_path / "a" / "out")
    assert raised.value.filename == str(tmp_path / "a" / "out") and str(tmp_path) in raised.value.strerror
    assert os.listdir(tmp_path) == []
