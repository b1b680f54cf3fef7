"""fairseq checkpoints on both sides: read (``load_checkpoint``, the one unpickling), config rewritten,
written at update 0 (``write_checkpoint_folder``, the one writer of every converter and import)."""
import argparse
import copy
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from fairseq import checkpoint_utils
from omegaconf import OmegaConf

from ..runtime import checkpoints
from ..tasks.longformer_mlm import batch_pad_multiple
from longformer_common.atomic import staged_folder

# Tokenizer files fairseq's hub loader looks for next to model.pt: copied along when present.
TOKENIZER_FILES = ("encoder.json", "vocab.bpe", "sentencepiece.bpe.model", "merges.txt",
                   "vocab.json", "bpecodes", "code")


def resolve_source(source, checkpoint_file: str = "model.pt", dict_file=None,
                   kind: str = "RoBERTa") -> Tuple[Path, Path]:
    """A folder (``folder/checkpoint_file``) or a checkpoint file; dict.txt next to it by default."""
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"--source {str(source)!r}: no such file or folder")
    checkpoint = path / checkpoint_file if path.is_dir() else path
    if not checkpoint.is_file():
        raise FileNotFoundError(f"--source {str(source)!r}: the folder has no checkpoint {checkpoint_file!r}")
    dictionary = Path(dict_file) if dict_file is not None else checkpoint.parent / "dict.txt"
    if not dictionary.is_file():
        raise FileNotFoundError(f"dictionary {str(dictionary)!r} not found: a fairseq {kind} folder holds dict.txt "
                                "next to model.pt (or pass --dict)")
    return checkpoint, dictionary


def checkpoint_file(path) -> Path:
    """``path`` itself, or ``path/model.pt`` for a folder; FileNotFoundError when absent."""
    path = Path(path)
    checkpoint = path / "model.pt" if path.is_dir() else path
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint {str(checkpoint)!r} not found: pass the model.pt (or checkpoint*.pt) "
                                "that fairseq-train or a converter wrote")
    return checkpoint


def load_checkpoint(path: Path, kind: str = "RoBERTa") -> dict:
    """A fairseq checkpoint as a dict, with a one-line error naming the file and what it is not."""
    if Path(path).is_file() and Path(path).stat().st_size == 0:
        raise ValueError(f"{str(path)!r} is not a fairseq {kind} checkpoint: the file is empty (an interrupted "
                         "copy? pass the model.pt that fairseq-train or a converter wrote)")
    try:  # onto the CPU, as data, with the run's trust (--trust-checkpoint)
        state = checkpoints.load_checkpoint(path, trust=checkpoints.checkpoints_trusted())
    except checkpoints.UntrustedCheckpointError:
        raise  # already one line naming the file and the fix
    except Exception as error:  # not a torch file at all, truncated, ...
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"{str(path)!r} is not a fairseq {kind} checkpoint: torch.load failed "
                         f"({type(error).__name__}: {first_line}); pass the model.pt that fairseq-train or a "
                         "converter wrote") from error
    if not isinstance(state, Mapping) or not isinstance(state.get("model"), Mapping):
        found = sorted(map(str, state))[:10] if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"{str(path)!r} is not a fairseq checkpoint: expected a dict with a 'model' "
                         f"state dict, found {found}; pass the model.pt that fairseq-train or a converter wrote")
    return dict(state)


def load_upgraded(path: Path, kind: str) -> dict:
    """A checkpoint as fairseq's ``load_checkpoint_to_cpu`` returns it (omegaconf cfg, old ones upgraded)."""
    state = load_checkpoint(path, kind)
    if state.get("cfg") is not None:
        state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})
    state = checkpoint_utils._upgrade_state_dict(state)
    if state.get("cfg") is None:
        raise ValueError(f"{str(path)!r} has no fairseq config (cfg/args): not a fairseq checkpoint")
    return state


class DictionaryTask(SimpleNamespace):
    """What a fairseq model builder asks of a task: the dictionaries and the positions."""
    def __init__(self, dictionary, positions=None):
        super().__init__(cfg=None, source_dictionary=dictionary, target_dictionary=dictionary,
                         max_positions=lambda: positions)


def config_get(obj, key, default=None):
    """``key`` of a config section, a Mapping or a Namespace."""
    return obj.get(key, default) if isinstance(obj, Mapping) else getattr(obj, key, default)


def config_set(obj, key, value) -> None:
    if isinstance(obj, argparse.Namespace):
        setattr(obj, key, value)
    else:
        obj[key] = value


def config_sections(state: Mapping):
    """(args, cfg) deep copies, exactly one not None; the model section: ``args`` or ``cfg['model']``."""
    if state.get("cfg") is not None:
        cfg = state["cfg"]
        if OmegaConf.is_config(cfg):
            cfg = OmegaConf.to_container(cfg, resolve=True)
        cfg = copy.deepcopy(dict(cfg))
        if cfg.get("model") is None:
            raise ValueError("the checkpoint's cfg has no 'model' section: cannot write a loadable config")
        for section in ("model", "task"):  # the model's: a Namespace for legacy models (RoBERTa, BART)
            if isinstance(cfg.get(section), Mapping):
                cfg[section] = dict(cfg[section])
        return None, cfg
    if state.get("args") is not None:
        return copy.deepcopy(state["args"]), None
    raise ValueError("the checkpoint has neither 'cfg' nor 'args': fairseq cannot rebuild a model from it")


def write_checkpoint_folder(out_dir, overwrite: bool, checkpoint: dict, files: Mapping[str, Path], inputs) -> None:
    """out_dir staged whole (``atomic.staged_folder``): model.pt and ``files`` (name there -> file to copy)."""
    with staged_folder(out_dir, overwrite, inputs) as tmp:
        torch.save(checkpoint, tmp / "model.pt")
        for name, source in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tmp / name)


def fresh_training_state(extra: Optional[Dict[str, object]] = None,
                         criterion_name: str = "LongformerMLMLoss") -> Dict[str, object]:
    """Training state at update 0, no optimizer state (no --reset-* needed); ``extra``: more ``extra_state``."""
    return {"optimizer_history": [{"criterion_name": criterion_name, "optimizer_name": "none",
                                   "lr_scheduler_state": {"best": None}, "num_updates": 0}],
            "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True, "version": 2},
                            "previous_training_time": 0.0, **(extra or {})}, "last_optimizer_state": None}


@dataclass
class ConvertedCheckpoint:
    checkpoint: Path
    dictionary: Path
    arch: str
    attention_window: Tuple[int, ...]
    max_positions: int  # the encoder's
    model_dims: Dict[str, int]

    def size_flags(self) -> List[str]:  # model_dims as fairseq's flags
        return [text for name, value in self.model_dims.items() for text in ("--" + name.replace("_", "-"), str(value))]

    def train_flags(self) -> List[str]:
        return ["--arch", self.arch, "--task", "longformer_mlm", "--criterion", "longformer_mlm", *self.size_flags(),
                "--attention-window", ",".join(str(w) for w in self.attention_window),
                "--max-positions", str(self.max_positions), "--tokens-per-sample", str(self.max_positions),
                "--pad-to-multiple", str(batch_pad_multiple(self.attention_window, self.max_positions)),
                "--restore-file", str(self.checkpoint)]


def continue_command(flags: Sequence[str]) -> str:
    return "longformer-train DATA " + " ".join(shlex.quote(str(f)) for f in flags)
