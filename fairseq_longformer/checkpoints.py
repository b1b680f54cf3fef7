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
    DictConfig, i.e. what DDP ranks other than 0 receive from ``broadcast_object``.

Anything else is refused with one line naming the file, the unexpected types and the fix:
``--trust-checkpoint`` (``trust=True``), which loads with ``weights_only=False`` and so runs
code from the file. fairseq's own loads (resume, ``--restore-file``, the DDP broadcast, the hub
interface) come here through ``compat``; the trust flag of a fairseq CLI run is
``--trust-checkpoint``, added to fairseq's parser by ``add_trust_flag``.
"""
import argparse
import collections
import contextlib
import os
import pickle
import typing
from typing import Iterator, List

import torch

from .user_errors import UserInputError, check_cli_args, install_excepthook

TRUST_FLAG = "--trust-checkpoint"
TRUST_HELP = ("load checkpoints that hold types other than tensors and fairseq's configuration "
              "(runs code from the file: only for files you trust)")


def safe_globals() -> List[object]:
    """The types a fairseq or project checkpoint may hold besides tensors and plain containers."""
    from omegaconf import DictConfig, ListConfig
    from omegaconf.base import ContainerMetadata, Metadata
    from omegaconf.nodes import AnyNode

    return [argparse.Namespace, DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode,
            typing.Any, collections.defaultdict, dict, list, int]


def _qualified(obj) -> str:
    return "typing.Any" if obj is typing.Any else f"{obj.__module__}.{obj.__qualname__}"


class UntrustedCheckpointError(UserInputError):
    """A checkpoint that needs more than the allowlist to load."""


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


def refusal(source, error: Exception) -> str:
    """One line: the file, what it needs that data may not hold, and the fix."""
    unexpected = _unexpected_types(source)
    needs = (f"types other than tensors and fairseq's configuration: {', '.join(unexpected)}"
             if unexpected else f"more than plain data ({str(error).strip().splitlines()[-1][:200]})")
    return (f"{_name(source)}: refused to load, the checkpoint holds {needs}; if you trust the file "
            f"and where it came from, pass {TRUST_FLAG} (this runs code from the file)")


def load_checkpoint(path, *, trust: bool = False, map_location="cpu", mmap: bool = False) -> dict:
    """``torch.load`` a fairseq checkpoint (a path or an open binary file) as data.

    Raises UntrustedCheckpointError (one line: file, unexpected types, ``--trust-checkpoint``)
    when it holds anything beyond the allowlist; other failures (missing, truncated, not a torch
    file) are torch's own errors. ``trust=True`` loads with ``weights_only=False``.
    """
    if trust:
        return torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    with torch.serialization.safe_globals(safe_globals()):
        try:
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as error:
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
    The parsed arguments also pass ``user_errors.check_cli_args``, and the plugin's UserInputErrors
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
