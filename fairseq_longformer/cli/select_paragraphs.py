"""``longformer-select-paragraphs``: HotpotQA's paragraph selection (the paper's first stage), and
the model's predictions and official scores from the same pass.

    longformer-select-paragraphs --checkpoint stage1/checkpoint_best.pt --data data-bin/hotpotqa \\
        --split train=hotpot_train_v1.1.json --split valid=hotpot_dev_distractor_v1.json \\
        --destdir data-selected [--threshold -3.0] [--max-paragraphs 5]

``--data`` is the folder ``longformer-prepare-task hotpotqa`` wrote from those same files (the
model reads the tokens it was trained on; the side file's ids and titles are checked against the
file). Written into ``--destdir`` (built aside and renamed into place: nothing half-written;
never one of the inputs):

  SPLIT.json              the file as published with each scored question's context cut to its
                          kept paragraphs (``hotpotqa_selection``); questions the reader dropped
                          are copied unchanged. ``longformer-prepare-task hotpotqa`` prepares
                          stage two from it, with stage one's tokenizer.
  SPLIT.predictions.json  the model's predictions in the official format ({"answer": {id: text},
                          "sp": {id: [[title, sentence], ...]}}), evidence by --evidence-decoding
  selection.json          per split: paragraphs kept per question, recall of the gold supporting
                          paragraphs, the questions the reader will drop from SPLIT.json and why,
                          answer / supporting-fact / joint EM and F1 under both evidence decodings
                          over every question of the file (``scores``: a question the reader
                          dropped scores 0) and over the scored ones (``scores_over_scored``),
                          seconds and device

The model runs in batches of --batch-size on the GPU when there is one (else the PyTorch path on
CPU; --cpu forces it). Bad input: one line naming it, exit status 2, nothing written.
"""
import argparse
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

from longformer_common.cli import one_line_errors

from ..runtime.checkpoints import TRUST_FLAG, TRUST_HELP, trust_checkpoints
from .hotpotqa_selection import SelectionReport, keep_paragraphs, score_split, shorten

PROG = "longformer-select-paragraphs"


class SelectionError(ValueError):
    """A bad input; its message is one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="a longformer_hotpotqa checkpoint (fairseq-train's)")
    p.add_argument("--data", required=True, help="the folder longformer-prepare-task hotpotqa wrote from the files")
    p.add_argument("--split", action="append", required=True, metavar="SPLIT=FILE",
                   help="a prepared split and the published JSON it was prepared from (repeat for several)")
    p.add_argument("--destdir", required=True, help="output folder (built aside, renamed into place)")
    p.add_argument("--threshold", type=float, default=-3.0,
                   help="keep paragraphs whose raw score is above this (default: -3.0, the paper's)")
    p.add_argument("--max-paragraphs", type=int, default=5, help="keep at most this many (default: 5, the paper's)")
    p.add_argument("--evidence-decoding", choices=("two_paragraphs", "threshold"), default="two_paragraphs",
                   help="supporting facts of SPLIT.predictions.json (selection.json scores both)")
    p.add_argument("--batch-size", type=int, default=8, help="questions per forward pass (default: 8)")
    p.add_argument("--cpu", action="store_true", help="run on CPU even when a GPU is there")
    p.add_argument("--overwrite", action="store_true", help="replace a --destdir this tool wrote before")
    p.add_argument(TRUST_FLAG, action="store_true", help=TRUST_HELP)
    return p


def parse_splits(specs: List[str]) -> Dict[str, str]:
    splits = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SelectionError(f"--split {spec!r} is not SPLIT=FILE: e.g. --split valid=hotpot_dev_distractor_v1.json")
        if os.sep in name or name in (os.curdir, os.pardir):  # a split is a name inside --data, and names an output
            raise SelectionError(f"--split {spec!r}: SPLIT {name!r} is a path, not the name of a split of --data "
                                 f"(train, valid, test): e.g. --split valid={path}")
        if name in splits:
            raise SelectionError(f"--split {name} is given twice: name each split once")
        splits[name] = path
    return splits


def check_inputs(a, splits: Dict[str, str]) -> None:
    if not os.path.isfile(a.checkpoint):
        raise SelectionError(f"--checkpoint {a.checkpoint} is not a file")
    if not a.max_paragraphs >= 1 or not a.batch_size >= 1:
        raise SelectionError("--max-paragraphs and --batch-size must be at least 1")
    if not math.isfinite(a.threshold):  # NaN keeps nothing but the top paragraph; infinities keep all or none
        raise SelectionError(f"--threshold {a.threshold}: give a finite raw paragraph score (default -3.0, the "
                             "paper's); --max-paragraphs caps how many are kept")
    for name, path in splits.items():
        if not os.path.isfile(path):
            raise SelectionError(f"--split {name}={path}: {path} is not a file")
        if not os.path.isfile(os.path.join(a.data, f"{name}.hotpot.jsonl")):
            raise SelectionError(f"--data {a.data} has no {name}.hotpot.jsonl: pass the folder "
                                 f"longformer-prepare-task hotpotqa wrote (its splits: train, valid, test)")
    from longformer_common.atomic import check_output_dir

    check_output_dir(a.destdir, a.overwrite, [a.checkpoint, a.data, *splits.values()])  # raises before the model loads


def read_published(name: str, path: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SelectionError(f"--split {name}={path} is not JSON ({e}): pass a HotpotQA file")
    if not isinstance(records, list):
        raise SelectionError(f"--split {name}={path} holds a JSON {type(records).__name__}, not HotpotQA's list")
    return records


def match(name: str, path: str, records: list):
    """A function: prepared side record -> the index of its published record in ``records``,
    checked to be the one it was prepared from (same id, same leading titles)."""
    ids = {}
    for i, r in enumerate(records):
        if isinstance(r, dict) and "_id" in r:
            if str(r["_id"]) in ids:
                raise SelectionError(f"{path} holds the _id {r['_id']} twice: give each question its own _id")
            ids[str(r["_id"])] = i

    def find(record: dict) -> int:
        i = ids.get(record["id"])
        titles = [title for title, _ in record["paragraphs"]]
        if i is None or [c[0] for c in records[i]["context"][:len(titles)]] != titles:
            raise SelectionError(f"--data's {name} split was not prepared from {path} (question {record['id']} "
                                 "differs): pass the file the data was prepared from")
        return i
    return find


def select_split(a, name: str, path: str, task, model, head: str, max_answer: int, device, out: Path) -> dict:
    from longformer_preprocessing.tasks import hotpotqa
    from longformer_preprocessing.tasks.examples import BadExample

    records = read_published(name, path)
    dataset = task.load_dataset(name)
    find = match(name, path, records)
    selected, report = list(records), SelectionReport(len(records))
    predictions = {"answer": {}, "sp": {}}
    # the answer decoded as the checkpoint's task decodes it in validation (older checkpoints: anywhere)
    answer_decoding = getattr(task.cfg, "answer_decoding", None) or "anywhere"
    for side, scored in score_split(model, dataset, head, max_answer, a.batch_size, device, answer_decoding):
        i = find(side)
        kept = keep_paragraphs(scored["paragraphs"], a.threshold, a.max_paragraphs)
        selected[i] = shorten(records[i], kept)
        report.add(records[i], kept, {k: v for k, v in scored.items() if k != "paragraphs"}, side)
        answer, facts = scored[a.evidence_decoding]
        predictions["answer"][side["id"]], predictions["sp"][side["id"]] = answer, [list(f) for f in facts]
        try:
            hotpotqa.example_of(selected[i])
        except BadExample as bad:
            report.dropped_next[bad.reason] += 1
    (out / f"{name}.json").write_text(json.dumps(selected), encoding="utf-8")
    (out / f"{name}.predictions.json").write_text(json.dumps(predictions), encoding="utf-8")
    return report.summary(a.threshold, a.max_paragraphs, str(device))


def run(a, splits: Dict[str, str]) -> dict:
    import torch
    from fairseq import checkpoint_utils

    import fairseq_longformer  # noqa: F401  (registers the task, model and criterion)

    from longformer_common.atomic import staged_folder

    device = torch.device("cuda" if torch.cuda.is_available() and not a.cpu else "cpu")
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([a.checkpoint],
                                                                          arg_overrides={"data": a.data})
    except (FileNotFoundError, KeyError, RuntimeError) as e:  # not a fairseq checkpoint, or not this task's
        raise SelectionError(f"--checkpoint {a.checkpoint} could not be loaded with --data {a.data} "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__}): pass a "
                             "longformer_hotpotqa checkpoint and the data it was trained on")
    if cfg.task._name != "longformer_hotpotqa":
        raise SelectionError(f"--checkpoint {a.checkpoint} is a {cfg.task._name} model, not longformer_hotpotqa")
    model = models[0].to(device).eval()
    report = {"checkpoint": os.path.abspath(a.checkpoint), "splits": {}}
    inputs = [a.checkpoint, a.data, *splits.values()]
    with staged_folder(a.destdir, overwrite=a.overwrite, inputs=inputs) as tmp:
        for name, path in splits.items():
            report["splits"][name] = select_split(a, name, path, task, model, cfg.task.hotpotqa_head_name,
                                                  cfg.task.max_answer_tokens, device, Path(tmp))
        (Path(tmp) / "selection.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    # importing fairseq configured the root logger at INFO: the data loads' lines are noise here
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", force=True)

    try:
        splits = parse_splits(a.split)
        check_inputs(a, splits)
        with trust_checkpoints(a.trust_checkpoint):
            report = run(a, splits)
    except (SelectionError, ValueError, FileExistsError) as e:  # UserInputError is a ValueError
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    for name, s in report["splits"].items():
        joint = s["scores"][a.evidence_decoding]["joint_f1"]
        print(f"{name}: joint F1 {joint} ({a.evidence_decoding}) scored over {s['questions']} questions, "
              f"{s['passed_unchanged']} of them dropped by the reader, scored 0; {s['paragraphs_kept']['mean']} "
              f"paragraphs kept per question, gold paragraph recall {s['gold_paragraph_recall']}%, "
              f"{s['seconds']} s on {s['device']}")
    print(f"{PROG}: wrote {a.destdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
