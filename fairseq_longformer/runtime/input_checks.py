"""What a fairseq training run is given, checked where fairseq reads it, before anything is written.

fairseq fails deep inside on many inputs a user can fix, with a traceback whose last line hides
the cause. ``inputs_checked_where_fairseq_reads_them`` (installed by ``runtime.apply``) calls the
checks here from fairseq's own steps (fairseq-train and fairseq-hydra-train alike); each raises
``UserInputError`` (one line: the input, the rule, the fix):

  * the run's flags (``check_precision``, ``check_model_flags``): ``--fp16`` without CUDA,
    dropout out of [0, 1) (before the model is built).
  * the data (``data_checks.check_split``): a missing, empty or truncated split, ids beyond the
    dictionary.
  * the restore (``check_restore_dictionary``, ``name_architecture_mismatch``): the data's
    dict.txt against the one beside ``--restore-file``/``--finetune-from-model`` (a change only
    with ``--allow-dictionary-change``, and only by symbols appended after the pretrained
    ones, the pretrained ``<mask>`` row kept for ``<mask>``: ``mask_row_move``), and every size
    flag that differs from the checkpoint's.
"""
import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import torch
from fairseq import options, tasks
from fairseq.trainer import Trainer

from ..models.vocabulary import TOKEN_ROW_KEYS
from .checkpoints import checkpoints_trusted, load_checkpoint as load_as_data
from .data_checks import check_split
from .errors import UserInputError

logger = logging.getLogger(__name__)

ALLOW_DICTIONARY_CHANGE = "--allow-dictionary-change"


_allowed = {"dictionary_change": False}


def allow_dictionary_change(allowed: bool) -> None:
    """The run's ``--allow-dictionary-change`` (set where fairseq's CLIs parse their flags)."""
    _allowed["dictionary_change"] = bool(allowed)


def dictionary_change_allowed() -> bool:
    return _allowed["dictionary_change"]


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


# torch.optim's words when a saved optimizer state does not fit the run's parameter groups
OPTIMIZER_GROUP_MISMATCH = ("different number of parameter groups", "doesn't match the size of optimizer's group")


def name_optimizer_mismatch(checkpoint: str, flag: str) -> UserInputError:
    """The one line for a checkpoint whose optimizer state has other parameter groups than the
    run builds: the weight decay is off for biases and LayerNorm weights in a group of their own
    (``training.lr_groups``), so a run saved without weight decay (or by a version before the
    groups) and resumed with it has one group where the run has two."""
    return UserInputError(f"{flag} {checkpoint}: its optimizer state has other parameter groups than this run "
                          "builds (--weight-decay changed, or the run was saved by an older version); pass "
                          "--reset-optimizer to keep its weights and start the optimizer afresh")


def inputs_checked_where_fairseq_reads_them() -> None:
    """fairseq reads a run's data, flags and restore file without checking them.

    Fails without it: a missing split ends in ``FileNotFoundError: Dataset not found``, an empty
    one in ``StopIteration``, a truncated ``.bin`` in numpy's mmap error, binaries holding ids the
    dictionary lacks in ``IndexError: index out of range in self``; ``--fp16`` on CPU in an
    ``AssertionError``; a dropout of 1.5 trains; ``--restore-file``/``--finetune-from-model`` of
    other sizes in ``Cannot load model parameters ... please ensure that the architectures match``
    (naming no flag), and one of another dictionary trains silently on scrambled ids; a checkpoint
    whose optimizer has other parameter groups (resumed with another ``--weight-decay``) ends in
    torch's ``loaded state dict has a different number of parameter groups``. With it,
    each is one line (the checks above, ``data_checks``) before anything is written: the task's
    ``load_dataset`` and ``build_model`` (wrapped per task in ``setup_task``), the Trainer's
    construction and its ``load_checkpoint``. ``--allow-dictionary-change`` joins every fairseq
    CLI's parser (beside ``--trust-checkpoint``).
    """
    if getattr(tasks.setup_task, "_longformer_patched", False):
        return
    original_setup = tasks.setup_task

    def setup_task(cfg, **kwargs):
        task = original_setup(cfg, **kwargs)
        data, load, build = getattr(cfg, "data", None), task.load_dataset, task.build_model

        def load_dataset(split, *args, **more):
            if isinstance(data, str) and data:
                try:
                    dictionary = task.source_dictionary
                except (NotImplementedError, AttributeError):
                    dictionary = None
                hint = ("give a data folder with a train split" if split == "train" else
                        "pass --disable-validation (or another --valid-subset / --gen-subset)")
                check_split(data, split, dictionary, hint)
            return load(split, *args, **more)

        def build_model(model_cfg, *args, **more):
            check_model_flags(model_cfg)
            return build(model_cfg, *args, **more)

        task.load_dataset, task.build_model = load_dataset, build_model
        return task

    original_init = Trainer.__init__

    def __init__(self, cfg, *args, **kwargs):
        check_precision(cfg.common, torch.cuda.is_available())
        original_init(self, cfg, *args, **kwargs)

    original_restore = Trainer.load_checkpoint

    def load_checkpoint(self, filename, *args, **kwargs):
        finetune = self.cfg.checkpoint.finetune_from_model
        flag = ("--finetune-from-model" if finetune and os.path.abspath(finetune) == os.path.abspath(filename)
                else "--restore-file")
        data = getattr(self.cfg.task, "data", None)
        move, rows, fresh = None, [], []
        if os.path.isfile(filename) and isinstance(data, str):
            check_restore_dictionary(filename, data, dictionary_change_allowed(), flag)
            move = mask_row_move(filename, data, getattr(self.task, "source_dictionary", None))
        if move is not None:
            named = dict(self.get_model().named_parameters(remove_duplicate=True))  # tied rows once
            rows = [named[key] for key in TOKEN_ROW_KEYS if key in named]
            fresh = [row[move[0]].detach().clone() for row in rows]
        try:
            extra_state = original_restore(self, filename, *args, **kwargs)
            if move is not None:
                move_rows(rows, move, fresh)
            return extra_state
        except Exception as error:
            if any(words in str(error) for words in OPTIMIZER_GROUP_MISMATCH):
                raise name_optimizer_mismatch(filename, flag) from None
            if not str(error).startswith("Cannot load model parameters"):
                raise
            state = load_as_data(filename, trust=checkpoints_trusted(), mmap=True)
            stored = state["cfg"]["model"] if state.get("cfg") else state.get("args")
            raise name_architecture_mismatch(filename, {"model": stored}, self.cfg.model, flag,
                                             str(error.__context__ or "")) from None

    original_parse = options.parse_args_and_arch

    def parse_args_and_arch(parser, *args, **kwargs):
        if ALLOW_DICTIONARY_CHANGE not in parser._option_string_actions:
            parser.add_argument(ALLOW_DICTIONARY_CHANGE, action="store_true",
                                help="restore a checkpoint onto data whose dict.txt appends symbols to the "
                                     "checkpoint's (their rows start fresh)")
        parsed = original_parse(parser, *args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        allow_dictionary_change(bool(getattr(namespace, "allow_dictionary_change", False)))
        return parsed

    setup_task._longformer_patched = True
    tasks.setup_task = setup_task
    Trainer.__init__ = __init__
    Trainer.load_checkpoint = load_checkpoint
    options.parse_args_and_arch = parse_args_and_arch
