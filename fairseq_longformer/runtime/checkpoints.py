"""Loading fairseq checkpoints as data: one loader for every checkpoint this project reads.

A fairseq checkpoint is a pickle. Loaded with ``torch.load(weights_only=False)`` (what fairseq
does), a file from someone else can run any code on this machine. Here every load is
``weights_only=True`` with an allowlist of exactly the types fairseq and this project write:

  * ``argparse.Namespace``: the ``args`` of older checkpoints, and the ``cfg.model`` namespace
    that fairseq-train still writes (seen in a 1-update ``roberta_base`` run of fairseq-fixed
    0.12.3.1: ``get_unsafe_globals_in_checkpoint`` lists only this type);
  * omegaconf's containers (``DictConfig``, ``ListConfig``, their metadata, ``AnyNode``,
    ``typing.Any``) and ``collections.defaultdict``, ``dict``, ``list``, ``int`` as globals: what
    a checkpoint holds once ``checkpoint_utils.load_checkpoint_to_cpu`` turned its ``cfg`` into a
    DictConfig, i.e. what DDP ranks other than 0 receive from ``broadcast_object``;
  * what fairseq's published-era checkpoints hold (2019 to 0.12: meters, numpy numbers), as
    inert stand-ins that run none of the original classes' code (``checkpoint_types``).

Before any load, a file in torch's zip format is checked to be intact (``check_intact``: every
member matches its CRC-32), so a flipped bit is refused in one line instead of loading as wrong
weights, with or without trust.

Anything else is refused with one line naming the file, the unexpected types and the fix:
``--trust-checkpoint`` (``trust=True``), which loads with ``weights_only=False`` and so runs
code from the file. fairseq's own loads (resume, ``--restore-file``, the DDP broadcast, the hub
interface) come here through ``runtime`` (``shims.checkpoint_loads_as_data``); the trust flag of a fairseq CLI run is
``--trust-checkpoint``, added to fairseq's parser by ``add_trust_flag``.
"""
import argparse
import collections
import contextlib
import os
import pickle
import typing
import zipfile
from typing import Iterator, List

import torch
from omegaconf import DictConfig, ListConfig
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.nodes import AnyNode

from .checkpoint_types import realise, stand_ins
from .errors import UserInputError, check_cli_args, install_excepthook

TRUST_FLAG = "--trust-checkpoint"
TRUST_HELP = ("load checkpoints that hold types other than tensors and fairseq's configuration "
              "(runs code from the file: only for files you trust)")


def safe_globals() -> List[object]:
    """The types a fairseq or project checkpoint may hold besides tensors and plain containers."""
    return [argparse.Namespace, DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode,
            typing.Any, collections.defaultdict, dict, list, int, *stand_ins()]


def _qualified(obj) -> str:
    if isinstance(obj, tuple):  # (stand-in, the pickled name it answers to)
        return obj[1]
    return "typing.Any" if obj is typing.Any else f"{obj.__module__}.{obj.__qualname__}"


class UntrustedCheckpointError(UserInputError):
    """A checkpoint that needs more than the allowlist to load."""


class CorruptCheckpointError(UserInputError):
    """A checkpoint whose bytes are not those torch.save wrote (a member fails its CRC-32)."""


def _name(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or "the checkpoint received from another process"


def _unexpected_types(source) -> List[str]:
    """The globals ``source`` would import that the allowlist does not hold (best effort)."""
    allowed = {_qualified(obj) for obj in safe_globals()}
    try:
        if hasattr(source, "seek"):
            source.seek(0)
        names = torch.serialization.get_unsafe_globals_in_checkpoint(source)
    except Exception:  # not a zip checkpoint: torch's own error says what it is
        return []
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
    return sorted(set(names) - allowed)


def _is_torch_file(source) -> bool:
    """Whether ``source`` is in one of torch.save's formats (a zip archive, or the legacy pickle
    stream, which opens with the pickle protocol byte 0x80): a text or random file is neither,
    and is reported as not a checkpoint rather than as one that holds code."""
    if not isinstance(source, (str, os.PathLike)):
        return True
    try:
        with open(source, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return True
    return head.startswith(b"PK") or head[:1] == b"\x80"


def _detail(error: Exception) -> str:
    """The unpickler's own line of torch's weights-only message (not its advice or docs link)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Check the documentation of torch.load")]
    return (lines[-1] if lines else type(error).__name__)[:200]


def refusal(source, error: Exception) -> str:
    """One line: the file, what it needs that data may not hold, and the fix."""
    unexpected = _unexpected_types(source)
    needs = (f"types other than tensors and fairseq's configuration: {', '.join(unexpected)}"
             if unexpected else f"more than plain data ({_detail(error)})")
    return (f"{_name(source)}: refused to load, the checkpoint holds {needs}; if you trust the file "
            f"and where it came from, pass {TRUST_FLAG} (this runs code from the file)")


def _head(source) -> bytes:
    if hasattr(source, "read"):
        head = source.read(4)
        source.seek(-len(head), os.SEEK_CUR)
        return head
    with open(source, "rb") as handle:
        return handle.read(4)


def damage(source) -> str:
    """Why ``source`` (a path or a seekable binary file) is not a checkpoint as torch.save wrote
    it, or '' when it is intact: a zip archive (torch's format since 1.6) whose central directory
    lists a pickle and whose every member matches its CRC-32 (reads the whole file). A file that
    is not a zip archive is left to torch's reader (the legacy format of 2019 has no checksum)."""
    try:
        head = _head(source)
    except OSError:  # missing, a folder, unreadable: torch's own open says which
        return ""
    position = source.tell() if hasattr(source, "tell") else None
    try:
        if not head.startswith(b"PK\x03\x04") or not zipfile.is_zipfile(source):
            return ""  # not torch's zip format, or one cut short (its directory lost): torch says which
        with zipfile.ZipFile(source) as archive:
            if not any(name.endswith("data.pkl") for name in archive.namelist()):
                return "the archive holds no data.pkl"
            bad = archive.testzip()
            return f"its member {bad} fails its CRC-32 check" if bad is not None else ""
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as error:
        return f"its zip archive does not read ({type(error).__name__}: {str(error)[:120]})"
    finally:
        if position is not None:
            source.seek(position)


def check_intact(source) -> None:
    """Raise CorruptCheckpointError (one line: the file, what is wrong, the fix) unless
    ``source`` is intact (``damage``)."""
    problem = damage(source)
    if problem:
        raise CorruptCheckpointError(
            f"{_name(source)}: the checkpoint is corrupt ({problem}: changed since torch.save wrote it, e.g. a "
            "flipped bit on disk or in a copy); nothing was read from it: copy or download it again, or give "
            "another checkpoint")


def load_checkpoint(path, *, trust: bool = False, map_location="cpu", mmap: bool = False) -> dict:
    """``torch.load`` a fairseq checkpoint (a path or an open binary file) as data.

    Raises CorruptCheckpointError when a zip-format file fails its CRC check (``check_intact``,
    trusted or not), UntrustedCheckpointError (one line: file, unexpected types,
    ``--trust-checkpoint``) when it holds anything beyond the allowlist; other failures
    (missing, truncated, not a torch file) are torch's own errors. ``trust=True`` loads with
    ``weights_only=False``. Stand-ins of numpy values come back as real numpy values.
    """
    check_intact(path)
    if trust:
        return torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    with torch.serialization.safe_globals(safe_globals()):
        try:
            return realise(torch.load(path, map_location=map_location, weights_only=True, mmap=mmap))
        except (pickle.UnpicklingError, RecursionError) as error:  # RecursionError: nested past Python's limit
            if not _is_torch_file(path):
                raise ValueError(f"{_name(path)}: not a torch checkpoint (neither torch.save's zip format nor "
                                 "its pickle stream)") from None
            raise UntrustedCheckpointError(refusal(path, error)) from None


# --- the run's trust: fairseq's own loads (resume, --restore-file, DDP broadcast, hub) ---------

_trusted = False


def checkpoints_trusted() -> bool:
    """Whether this run passed ``--trust-checkpoint`` (the CLIs set it with ``trust_checkpoints``)."""
    return _trusted


@contextlib.contextmanager
def trust_checkpoints(trust: bool) -> Iterator[None]:
    """Within the block, loads that take the run's trust (fairseq's own: resume, the hub
    interface; the converters) use ``trust``: a CLI wraps its work in it with its flag."""
    global _trusted
    previous, _trusted = _trusted, bool(trust)
    try:
        yield
    finally:
        _trusted = previous


def fairseq_torch_load(f, map_location=None):
    """What ``torch.load`` is inside fairseq's checkpoint modules: ``load_checkpoint`` with the
    run's trust (an open file of a checkpoint, or the buffer ``broadcast_object`` received). A
    named file torch cannot read (empty, truncated, text) is one line naming it, not a traceback."""
    try:
        return load_checkpoint(f, trust=_trusted, map_location=map_location)
    except UserInputError:
        raise
    except (RuntimeError, EOFError, pickle.UnpicklingError, KeyError, ValueError) as error:  # a text file: KeyError
        name = getattr(f, "name", None)
        if not isinstance(name, str):
            raise
        detail = (str(error).strip().splitlines() or [""])[0][:200]
        reason = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
        raise UserInputError(f"{name}: not a complete fairseq checkpoint (empty, truncated or another kind of "
                             f"file: {reason}); give the path of an intact checkpoint (e.g. --restore-file)") from None


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust-checkpoint`` to a parser unless it has it (idempotent)."""
    if TRUST_FLAG not in parser._option_string_actions:
        parser.add_argument(TRUST_FLAG, action="store_true", help=TRUST_HELP)


def parse_args_and_arch_with_trust(original):
    """fairseq's ``options.parse_args_and_arch`` with ``--trust-checkpoint`` on every fairseq CLI
    (fairseq-train, -eval-lm, -generate, ...): the parser is built before the plugin is imported,
    so the flag is added where the arguments are parsed; the parsed flag sets fairseq's trust.
    The parsed arguments also pass ``errors.check_cli_args``, and the plugin's UserInputErrors
    end the CLI with one line (``install_excepthook``)."""

    def parse_args_and_arch(parser, *args, **kwargs):
        global _trusted
        install_excepthook()  # a refused checkpoint ends the CLI with one line, no traceback
        add_trust_flag(parser)
        parsed = original(parser, *args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed  # parse_known=True
        _trusted = bool(getattr(namespace, "trust_checkpoint", False))
        check_cli_args(namespace)
        return parsed

    parse_args_and_arch._longformer_patched = True
    return parse_args_and_arch
