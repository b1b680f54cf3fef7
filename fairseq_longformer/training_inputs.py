"""What a fairseq training run is given, checked before it writes anything; what goes wrong
while it runs, said in one line.

fairseq-train makes ``--save-dir`` first and then fails, deep inside, on many inputs a user can
fix; each ends in a traceback whose last line hides the cause. Three patches of ``compat``
(``_one_run_per_save_dir``, ``_inputs_checked_where_fairseq_reads_them``,
``_training_failures_in_one_line``) call the functions here from fairseq's own steps (in
fairseq-train and fairseq-hydra-train alike), and each raises ``UserInputError`` (one line: the input, the rule, the fix):

  * the save dir (``claim_save_dir``, ``create_save_dir``, ``release_save_dir``): one run per
    folder, held by the folder's own flock for the run's whole life (``atomic.hold_folder``: the
    kernel releases it when the process dies, so a killed run leaves no stale lock); a folder
    that does not exist is created only once the inputs are accepted (after the restore and the
    training data loaded) and removed again at exit if it stayed empty; an unwritable or
    read-only one is refused first. Only the master rank takes it (the rank that writes).
  * the run's flags (``check_precision``, ``check_model_flags``): ``--fp16`` without CUDA,
    dropout out of [0, 1) (before the model is built).
  * the data (``check_split``): a missing, empty or truncated split, and binaries holding ids
    the dictionary lacks (``indexed_dataset``'s MMIDIDX index read directly, no fairseq load).
  * the restore (``check_restore_dictionary``, ``name_architecture_mismatch``): the data's
    dict.txt against the one beside ``--restore-file``/``--finetune-from-model`` (a change only
    with ``--allow-dictionary-change``, and only by symbols appended after the pretrained
    ones, the pretrained ``<mask>`` row kept for ``<mask>``: ``mask_row_move``), and every size
    flag that differs from the checkpoint's.
  * while training (``diverged``, ``disk_error``): a NaN/inf loss or gradient, a full or
    read-only disk under a checkpoint save.
"""
import errno
import logging
import os
import struct
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from longformer_common.atomic import hold_folder
from .user_errors import UserInputError

logger = logging.getLogger(__name__)

ALLOW_DICTIONARY_CHANGE = "--allow-dictionary-change"
_allowed = {"dictionary_change": False}


def allow_dictionary_change(allowed: bool) -> None:
    """The run's ``--allow-dictionary-change`` (set where fairseq's CLIs parse their flags)."""
    _allowed["dictionary_change"] = bool(allowed)


def dictionary_change_allowed() -> bool:
    return _allowed["dictionary_change"]

# --- the save dir: one run per folder ------------------------------------------------------------

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
    import torch.distributed

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


# --- the run's flags -----------------------------------------------------------------------------

def check_precision(common, cuda_available: bool) -> None:
    """``--fp16`` on a machine without CUDA (fairseq asserts deep in the trainer)."""
    if getattr(common, "fp16", False) and (getattr(common, "cpu", False) or not cuda_available) \
            and not getattr(common, "memory_efficient_fp16", False):
        raise UserInputError("--fp16 needs a CUDA GPU and this run is on the CPU; drop --fp16, or pass --bf16 "
                             "(bfloat16 runs on CPU), or run on a GPU")


def check_model_flags(model_cfg) -> None:
    """Dropout probabilities outside [0, 1): refused before the model is built (fairseq's own
    modules take any value; a value of 1 or more zeroes or scales everything)."""
    for name in ("dropout", "attention_dropout", "activation_dropout"):
        value = _value(model_cfg, name)
        if value is not None and not 0.0 <= float(value) < 1.0:
            flag = "--" + name.replace("_", "-")
            raise UserInputError(f"{flag} {value} is out of range: a dropout probability must be in [0, 1) "
                                 f"(e.g. {flag} 0.1)")


# --- the data ------------------------------------------------------------------------------------

_MMAP_MAGIC = b"MMIDIDX\x00\x00"
_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
           8: np.uint16}
# ids beyond the dictionary are looked for in this many tokens at the start and end of a split
# (the whole of a corpus of today's sizes; a bounded read for a very large one)
ID_SCAN_TOKENS = 1 << 24


def _read_index(idx: Path):
    """(dtype, sizes, pointers) of fairseq's mmap index, None for the legacy ``TNTIDX`` formats
    (``--dataset-impl lazy/cached``: left to fairseq), or a reason it cannot be either."""
    data = idx.read_bytes()
    if data.startswith(b"TNTIDX"):
        return None
    head = len(_MMAP_MAGIC) + 8 + 1 + 8  # magic, version, dtype code, count (fairseq's Index)
    if len(data) < head or not data.startswith(_MMAP_MAGIC):
        return f"{idx.name} is not a fairseq mmap index (shorter than its header or another format)"
    _version, code, count = struct.unpack("<QBQ", data[len(_MMAP_MAGIC):head])
    if code not in _DTYPES:
        return f"{idx.name} names an unknown token type {code}"
    if len(data) < head + count * 12:
        return f"{idx.name} is truncated ({len(data)} bytes for {count:,} sequences)"
    sizes = np.frombuffer(data, np.int32, count, head)
    pointers = np.frombuffer(data, np.int64, count, head + count * 4)
    return _DTYPES[code], sizes, pointers


def _prefixes(data: Path, split: str) -> List[Path]:
    """The binaries of ``split`` in ``data`` and one level below (input0/, label/, ...)."""
    found = []
    for folder in [data, *sorted(p for p in data.iterdir() if p.is_dir())]:
        for name in ("", *sorted({p.name[len(split):-4] for p in folder.glob(f"{split}.*.idx")})):
            if (folder / f"{split}{name}.idx").exists() or (folder / f"{split}{name}.bin").exists():
                found.append(folder / f"{split}{name}")
    return found


def check_split(data_path: str, split: str, dictionary, disable_hint: str) -> None:
    """Raise UserInputError for a split the task cannot train or validate on. ``dictionary``: the
    task's (ids in the top-level binaries must be below its length); ``disable_hint``: the flag
    that runs without this split. A data folder without fairseq binaries at all is left to the
    task (another dataset format)."""
    data = Path(data_path.split(":")[0])
    if not data.is_dir() or not any(data.glob("*.idx")) and not any(data.glob("*/*.idx")):
        return
    prefixes = _prefixes(data, split)
    if not prefixes:
        raise UserInputError(f"{data}: no {split} split ({split}.bin/{split}.idx); binarize one (longformer-preprocess "
                             f"--valid-docs N, fairseq-preprocess --validpref) or {disable_hint}")
    total = 0
    for prefix in prefixes:
        idx, binary = prefix.with_name(prefix.name + ".idx"), prefix.with_name(prefix.name + ".bin")
        if not idx.exists() or not binary.exists():
            have, lack = (idx, binary) if idx.exists() else (binary, idx)
            raise UserInputError(f"{have}: {lack.name} is missing beside it (a copy cut short?); binarize the "
                                 f"{split} split again")
        index = _read_index(idx)
        if isinstance(index, str):
            raise UserInputError(f"{idx}: {index}; binarize the {split} split again")
        if index is None:
            return
        dtype, sizes, pointers = index
        total += len(sizes)
        expected = int(pointers[-1]) + int(sizes[-1]) * np.dtype(dtype).itemsize if len(sizes) else 0
        if binary.stat().st_size != expected:
            raise UserInputError(f"{binary}: {binary.stat().st_size:,} bytes where its index {idx.name} needs "
                                 f"{expected:,} (truncated, or from another binarization); binarize the {split} "
                                 "split again")
        if prefix == data / split and dictionary is not None and len(sizes):  # one-dictionary layouts only
            tokens = np.memmap(binary, dtype=dtype, mode="r")
            seen = max(int(tokens[:ID_SCAN_TOKENS].max()), int(tokens[-ID_SCAN_TOKENS:].max()))
            if seen >= len(dictionary):
                raise UserInputError(f"{binary} holds token id {seen} but {data / 'dict.txt'} gives a dictionary of "
                                     f"{len(dictionary)} symbols: the binaries and the dictionary disagree; use the "
                                     "dict.txt the data was binarized with (or binarize it again with --srcdict)")
    if total == 0:
        raise UserInputError(f"{data}: the {split} split is empty (0 sequences; e.g. preprocessed with --valid-docs 0 "
                             f"or from too small a corpus); binarize a non-empty one or {disable_hint}")


# --- the restore ---------------------------------------------------------------------------------

def read_symbols(path: Path) -> List[str]:
    """The symbols of a fairseq dict.txt in order (``SYMBOL COUNT [#fairseq:overwrite]`` lines)."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n").removesuffix(" #fairseq:overwrite") for line in handle if line.strip()]
    return [line.rsplit(" ", 1)[0] for line in lines]


def check_restore_dictionary(checkpoint: str, data_path: str, allow_change: bool, flag: str) -> None:
    """The data's dict.txt against the dict.txt beside the checkpoint (when there is one): the
    same, or, with ``--allow-dictionary-change``, the pretrained symbols in their order followed
    by new ones (their rows start fresh; every pretrained row keeps its id)."""
    beside = Path(checkpoint).parent / "dict.txt"
    ours = Path(data_path.split(":")[0]) / "dict.txt"
    if not beside.is_file() or not ours.is_file() or beside.resolve() == ours.resolve():
        return
    pretrained, data = read_symbols(beside), read_symbols(ours)
    if pretrained == data:
        return
    first = next((i for i, (a, b) in enumerate(zip(pretrained, data)) if a != b), None)
    if first is None and len(data) > len(pretrained) and allow_change:
        logger.warning("%s adds %d symbols after the %d of %s: their rows start from the model's initialisation",
                       ours, len(data) - len(pretrained), len(pretrained), beside)
        return
    where = (f"line {first + 1}: {data[first]!r} where the checkpoint has {pretrained[first]!r}" if first is not None
             else f"{len(data)} symbols where the checkpoint has {len(pretrained)}")
    if first is None and len(data) > len(pretrained):
        fix = f"pass {ALLOW_DICTIONARY_CHANGE} if the new symbols are intended"
    else:
        fix = (f"binarize the data with the checkpoint's dictionary (fairseq-preprocess --srcdict {beside}); "
               f"{ALLOW_DICTIONARY_CHANGE} accepts only symbols appended after the pretrained ones")
    raise UserInputError(f"{ours} differs from {beside}, the dictionary of {flag} {checkpoint} ({where}): the ids "
                         f"would train the wrong rows; {fix}")


def mask_row_move(checkpoint: str, data_path: str, dictionary) -> Optional[Tuple[int, int]]:
    """(the pretrained ``<mask>`` row, the run's ``<mask>`` row) when the data's dict.txt appends
    symbols to the one beside the checkpoint, else None. A masked-LM task appends ``<mask>`` after
    the dictionary's symbols, so the grown dictionary puts it further down: loaded as is, the
    pretrained <mask> row would become the first new symbol's and <mask> would start fresh."""
    beside = Path(checkpoint).parent / "dict.txt"
    ours = Path(data_path.split(":")[0]) / "dict.txt"
    if dictionary is None or "<mask>" not in dictionary.indices or not beside.is_file() or not ours.is_file():
        return None
    pretrained, data = len(read_symbols(beside)), len(read_symbols(ours))
    old, new = dictionary.nspecial + pretrained, dictionary.index("<mask>")
    return (old, new) if data > pretrained and new > old else None


def move_rows(parameters: Sequence, move: Tuple[int, int], fresh: Sequence) -> None:
    """Put row ``old`` of each token-row parameter (loaded from the checkpoint: its <mask>) at
    row ``new``, and give row ``old`` (now a new symbol's) the value it had before the load
    (``fresh``: the model's initialisation, as every new symbol's row)."""
    import torch

    old, new = move
    with torch.no_grad():
        for parameter, before in zip(parameters, fresh):
            parameter[new] = parameter[old].clone()
            parameter[old] = before


# sizes that decide a model's parameter shapes (fairseq's model flags, by their cfg names)
SIZE_KEYS = ("arch", "encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
             "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads",
             "decoder_input_dim", "decoder_output_dim", "max_positions", "max_source_positions",
             "max_target_positions", "tokens_per_sample", "attention_window", "encoder_normalize_before",
             "decoder_normalize_before", "share_decoder_input_output_embed", "untie_weights_roberta",
             "global_projections", "relative_positions")


def _value(config, key):
    if config is None:
        return None
    if isinstance(config, dict):
        return config.get(key)
    return getattr(config, key, None)


def name_architecture_mismatch(checkpoint: str, state_cfg, run_model_cfg, flag: str, detail: str) -> UserInputError:
    """The one line for a checkpoint the model cannot load: each size flag whose value differs,
    with both values; else the first shape mismatch torch reported (``detail``)."""
    stored = _value(state_cfg, "model") if state_cfg is not None else None
    differ = []
    for key in SIZE_KEYS:
        mine, theirs = _value(run_model_cfg, key), _value(stored, key)
        if mine is not None and theirs is not None and str(mine) != str(theirs):
            differ.append(f"--{key.replace('_', '-')} {mine} (the checkpoint: {theirs})")
    if differ:
        what = "; ".join(differ)
        fix = "pass the checkpoint's values"
    else:
        lines = [line.strip() for line in detail.splitlines() if "size mismatch" in line or "Missing key" in line
                 or "Unexpected key" in line]
        what = (lines[0] if lines else detail.strip().splitlines()[-1] if detail.strip() else "parameters differ")[:300]
        fix = ("a different number of token rows means another dictionary: use the checkpoint's dict.txt"
               if "embed_tokens" in what else "build the model the checkpoint was trained as")
    return UserInputError(f"{flag} {checkpoint} does not fit the model of this run: {what}; {fix}")


# --- while training ------------------------------------------------------------------------------

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
