"""Checkpoints laid out as fairseq wrote them from 2019 to 0.12, for tiny RoBERTa-, XLM-R- and
BART-shaped models, without an old fairseq: the model comes from fairseq 0.12's own builders
(``task.build_model`` on the KJV fixture's dictionary), everything around it is written with the
module paths and attribute layouts of each era, read in fairseq's git history:

  * ``fairseq.meters`` of v0.7.2 - v0.9.0: AverageMeter {val, avg, sum, count}, TimeMeter
    {init, start, n}, StopwatchMeter {sum, n, start_time}; ``trainer.init_meters`` names them
    train_loss ... train_wall and ``trainer.save_checkpoint`` stores that OrderedDict as
    ``extra_state['train_meters']``; ``checkpoint_utils.save_state`` writes {args, model,
    optimizer_history, extra_state, last_optimizer_state}; ``checkpoint_utils.save_checkpoint``
    puts train_iterator ({epoch, iterations_in_epoch[, shuffle]}), val_loss and best in
    extra_state. torch < 1.6 wrote the legacy (non-zip) format;
  * ``fairseq.logging.meters`` of v0.10 - v0.12 (``round`` on every meter, TimeMeter's ``i``);
    0.12's trainer stores ``metrics.state_dict()`` (plain lists of (priority, name, class name,
    state)) whose values, like val_loss and best, can be numpy numbers (fairseq issue 5603).

The classes are made with the era's ``__module__``/``__qualname__`` and registered in
``sys.modules`` only while ``torch.save`` pickles them (fairseq 0.12 itself aliases
``fairseq.meters``; the test must not depend on it).
"""
import argparse
import collections
import contextlib
import copy
import sys
import types
from pathlib import Path
from typing import Dict, Iterator

import numpy as np
import torch

TINY = ["--encoder-layers", "2", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "2"]
TINY_BART = TINY + ["--decoder-layers", "2", "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64",
                    "--decoder-attention-heads", "2"]
POSITIONS = 32

# (module, {class: attributes}) of each era's meters
METERS_2019 = ("fairseq.meters", {"AverageMeter": ("val", "avg", "sum", "count"),
                                  "TimeMeter": ("init", "start", "n"),
                                  "StopwatchMeter": ("sum", "n", "start_time")})
METERS_0_12 = ("fairseq.logging.meters", {"AverageMeter": ("round", "val", "sum", "count"),
                                          "SumMeter": ("round", "sum"),
                                          "TimeMeter": ("round", "init", "start", "n", "i"),
                                          "StopwatchMeter": ("round", "sum", "n", "start_time")})
# trainer.init_meters (v0.7.2 - v0.9.0): name -> class
TRAIN_METERS = {"train_loss": "AverageMeter", "train_nll_loss": "AverageMeter", "valid_loss": "AverageMeter",
                "valid_nll_loss": "AverageMeter", "wps": "TimeMeter", "ups": "TimeMeter", "wpb": "AverageMeter",
                "bsz": "AverageMeter", "gnorm": "AverageMeter", "clip": "AverageMeter", "oom": "AverageMeter",
                "wall": "TimeMeter", "train_wall": "StopwatchMeter"}


@contextlib.contextmanager
def era_module(module: str, classes) -> Iterator[Dict[str, type]]:
    """Classes ``module.Name`` (empty bodies) that pickle under exactly that name."""
    fake = types.ModuleType(module)
    made = {}
    for name in classes:
        cls = type(name, (), {})
        cls.__module__, cls.__qualname__ = module, name
        setattr(fake, name, cls)
        made[name] = cls
    before = sys.modules.get(module)
    sys.modules[module] = fake
    try:
        yield made
    finally:
        if before is None:
            del sys.modules[module]
        else:
            sys.modules[module] = before


def meter(cls, **attributes):
    obj = cls.__new__(cls)
    obj.__dict__.update(attributes)
    return obj


def training_args(data: Path, task: str, arch: str, *extra: str) -> argparse.Namespace:
    """The flat Namespace fairseq's training parser gives (what ``args`` of a checkpoint is)."""
    from fairseq import options

    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [str(data), "--task", task, "--arch", arch, "--cpu", *extra])


def built_model_state(args: argparse.Namespace) -> dict:
    """The state dict of the model fairseq 0.12's builders make from ``args`` (seeded)."""
    from fairseq import tasks

    torch.manual_seed(0)
    task = tasks.setup_task(args)
    return task.build_model(args).state_dict()


def roberta_args(data: Path, **overrides) -> argparse.Namespace:
    args = training_args(data, "masked_lm", "roberta_base", *TINY, "--tokens-per-sample", str(POSITIONS),
                         "--max-positions", str(POSITIONS))
    vars(args).update(overrides)
    return args


def bart_args(data: Path) -> argparse.Namespace:
    return training_args(data, "denoising", "bart_base", *TINY_BART, "--tokens-per-sample", str(POSITIONS),
                         "--max-source-positions", str(POSITIONS), "--max-target-positions", str(POSITIONS))


def old_roberta_keys(state: dict, fused: bool) -> dict:
    """A RoBERTa state dict as 2019's fairseq named it: ``decoder.sentence_encoder.*``,
    ``emb_layer_norm``, and (July 2019's RoBERTa, ``fused``) one in_proj of rows [q; k; v]."""
    old = {}
    for key, value in state.items():
        key = "decoder." + key[len("encoder."):] if key.startswith("encoder.") else key
        old[key.replace(".layernorm_embedding.", ".emb_layer_norm.")] = value
    if fused:
        for prefix in sorted({k.rsplit("q_proj.", 1)[0] for k in old if ".self_attn.q_proj." in k}):
            for part in ("weight", "bias"):
                old[f"{prefix}in_proj_{part}"] = torch.cat([old.pop(f"{prefix}{n}_proj.{part}") for n in "qkv"])
    return old


def save_2019(path: Path, args: argparse.Namespace, model: dict, criterion: str, with_shuffle: bool,
              legacy_format: bool, payload=None) -> Path:
    """``checkpoint_utils.save_state`` of v0.7.2 - v0.9.0, meters and all; ``payload``: one more
    value hidden among the meters (a malicious file in the same layout)."""
    module, layout = METERS_2019
    with era_module(module, layout) as cls:
        meters = collections.OrderedDict()
        for name, kind in TRAIN_METERS.items():
            values = {"AverageMeter": dict(val=2.5, avg=2.25, sum=225.0, count=100),
                      "TimeMeter": dict(init=0, start=1563000000.0, n=51200),
                      "StopwatchMeter": dict(sum=812.5, n=100, start_time=None)}[kind]
            meters[name] = meter(cls[kind], **values)
        if payload is not None:
            meters["train_loss"].val = payload
        iterator = {"epoch": 3, "iterations_in_epoch": 0, **({"shuffle": True} if with_shuffle else {})}
        state = {
            "args": args, "model": model,
            "optimizer_history": [{"criterion_name": criterion, "optimizer_name": "FairseqAdam",
                                   "lr_scheduler_state": {"best": 2.25}, "num_updates": 100}],
            "extra_state": {"train_iterator": iterator, "val_loss": 2.3, "best": 2.25, "train_meters": meters},
            "last_optimizer_state": None,  # the released files were stripped of it
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path, _use_new_zipfile_serialization=not legacy_format)
    return path


def save_0_12(path: Path, cfg_model: argparse.Namespace, model: dict, criterion: str, plain: bool = False) -> Path:
    """``Trainer.state_dict`` of v0.12 (cfg as a dict holding the model's Namespace), with numpy
    numbers in ``metrics`` and in val_loss/best, an array among them, and meter objects of
    ``fairseq.logging.meters`` in extra_state (what a user's code adds there); ``plain``: an
    empty extra_state (what the project's loader took before the stand-ins)."""
    module, layout = METERS_0_12
    with era_module(module, layout) as cls:
        metrics = collections.OrderedDict([
            ("train", [(0, "loss", "AverageMeter", {"val": np.float64(2.5), "sum": np.float64(225.0), "count": 100,
                                                    "round": 3}),
                       (50, "wps", "TimeMeter", {"init": 12.5, "n": np.int64(51200), "round": 0})]),
            ("valid", [(0, "loss", "AverageMeter", {"val": np.float32(2.3), "sum": np.arange(4, dtype=np.float32),
                                                    "count": np.int32(4), "round": 3})]),
        ])
        state = {
            "args": None,
            "cfg": {"_name": None, "model": cfg_model, "task": {"_name": cfg_model.task, "data": cfg_model.data},
                    "common": {"fp16": False, "seed": 1}},
            "model": model, "criterion": None,
            "optimizer_history": [{"criterion_name": criterion, "optimizer_name": "FairseqAdam",
                                   "lr_scheduler_state": {"best": np.float64(2.25)}, "num_updates": 100}],
            "task_state": {},
            "extra_state": {"metrics": metrics, "previous_training_time": 812.5,
                            "train_iterator": {"epoch": 3, "iterations_in_epoch": 0, "shuffle": True, "version": 2},
                            "val_loss": np.float64(2.3), "best": np.float64(2.25),
                            "user_meters": {"wall": meter(cls["TimeMeter"], round=0, init=1.0, start=2.0, n=3, i=4),
                                            "tokens": meter(cls["SumMeter"], round=None, sum=np.int64(7)),
                                            # big-endian, Fortran order: numpy pickles both in its state
                                            "grid": np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3))}},
            "last_optimizer_state": None,
        }
        if plain:
            state["extra_state"], state["optimizer_history"][0]["lr_scheduler_state"] = {}, {}
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
    return path


def published_era_checkpoints(data: Path, folder: Path) -> Dict[str, Path]:
    """{name: model.pt} of each era and family, each in its own folder with dict.txt:

    * roberta_2019: the July 2019 RoBERTa release (fairseq 0.7: fused in_proj, legacy format);
    * xlmr_2019: the November 2019 XLM-R release (0.9: split q/k/v, multilingual_masked_lm);
    * bart_2019: the November 2019 BART release (0.9: encoder./decoder. keys, args);
    * roberta_0_12, bart_0_12: fairseq 0.12's layout (zip format, numpy numbers, meters of
      ``fairseq.logging.meters``)."""
    roberta = roberta_args(data)
    roberta_state = built_model_state(roberta)
    bart = bart_args(data)
    xlmr = copy.deepcopy(roberta)
    xlmr.task, xlmr.bpe = "multilingual_masked_lm", "sentencepiece"
    written = {
        "roberta_2019": save_2019(folder / "roberta_2019" / "model.pt", roberta, old_roberta_keys(roberta_state, True),
                                  "MaskedLmLoss", with_shuffle=False, legacy_format=True),
        "xlmr_2019": save_2019(folder / "xlmr_2019" / "model.pt", xlmr, old_roberta_keys(roberta_state, False),
                               "MaskedLmLoss", with_shuffle=True, legacy_format=True),
        "bart_2019": save_2019(folder / "bart_2019" / "model.pt", bart, built_model_state(bart),
                               "CrossEntropyCriterion", with_shuffle=True, legacy_format=True),
        "roberta_0_12": save_0_12(folder / "roberta_0_12" / "model.pt", roberta, roberta_state, "MaskedLmLoss"),
        "bart_0_12": save_0_12(folder / "bart_0_12" / "model.pt", bart, built_model_state(bart), "CrossEntropyCriterion"),
    }
    for path in written.values():
        (path.parent / "dict.txt").write_bytes((data / "dict.txt").read_bytes())
    return written
