"""HotpotQA's two stages in small: data, the per-seed pipelines, the table; see the package's docstring."""
import argparse
import json
import sys
import threading
import time
from pathlib import Path

import longformer_experiments.hotpotqa_small as package
from longformer_common.flags import add_flags
from longformer_common import quiet
from longformer_common.provenance import provenance_line
from longformer_common.results import stamped, write_page
from longformer_experiments.hotpotqa_small.data import records
from longformer_experiments.runner import (KJV, PLUGIN, REPO, beats_every_seed, markdown_table, regenerate_note, run,
                                           settings, summarize)

MODULE = "longformer_experiments.hotpotqa_small"
BIN = Path(sys.executable).parent
DECODINGS = {"threshold": "threshold", "two_paragraphs": "two paragraphs"}
ROWS = [(stage, decoding) for stage in ("one stage", "two stages") for decoding in DECODINGS]


def prepare(a, train: Path, valid: Path, out: Path, tokenizer) -> Path:
    run(f"prepare {out.name}", [str(BIN / "longformer-prepare-task"), "hotpotqa", "--train", str(train),
                                "--valid", str(valid), "--destdir", str(out), "--overwrite",
                                "--max-input-tokens", str(a.long), *tokenizer], out.parent / f"{out.name}.log")
    return out


def train(a, data: Path, save: Path, seed: int) -> Path:
    cmd = [str(BIN / "fairseq-train"), str(data), "--user-dir", str(PLUGIN), "--task", "longformer_hotpotqa",
           "--criterion", "longformer_hotpotqa", "--arch", "longformer_base", "--encoder-layers", str(a.layers),
           "--encoder-embed-dim", str(a.dim), "--encoder-ffn-embed-dim", str(2 * a.dim),
           "--encoder-attention-heads", str(a.heads), "--attention-window", str(a.window),
           "--max-positions", str(a.long), "--pad-to-multiple", str(a.window), "--optimizer", "adam",
           "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01", "--clip-norm", "1.0",
           "--lr", str(a.lr), "--lr-scheduler", "polynomial_decay", "--total-num-update", str(a.updates),
           "--warmup-updates", str(max(1, a.updates // 10)), "--max-update", str(a.updates),
           "--batch-size", str(a.batch_size), "--dropout", "0", "--attention-dropout", "0", "--seed", str(seed),
           "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints", "--max-epoch", "1000",
           "--save-dir", str(save), "--log-format", "simple", "--log-interval", "50"]
    run(f"train {save.name}", cmd, save.parent / f"{save.name}.log", threads=1)
    return save / "checkpoint_last.pt"


def select(checkpoint: Path, data: Path, splits: dict, out: Path) -> dict:
    cmd = [str(BIN / "longformer-select-paragraphs"), "--checkpoint", str(checkpoint), "--data", str(data),
           "--destdir", str(out), "--overwrite", "--cpu", *(x for s, f in splits.items() for x in ("--split", f"{s}={f}"))]
    run(f"select {out.name}", cmd, out.parent / f"{out.name}.log", threads=1)
    return json.loads((out / "selection.json").read_text())["splits"]


def pipeline(a, raw: Path, data1: Path, seed: int) -> dict:
    """One seed: stage one, its selection (and its own evaluation on valid), stage two, its evaluation."""
    work = a.out / f"seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    stage1 = train(a, data1, work / "stage1", seed)
    selected = select(stage1, data1, {"train": raw / "train.json", "valid": raw / "valid.json"}, work / "selected")
    tokenizer = ["--sentencepiece-model", str(data1 / "spm.model"), "--srcdict", str(data1 / "dict.txt")]
    data2 = prepare(a, work / "selected" / "train.json", work / "selected" / "valid.json", work / "data_stage2",
                    tokenizer)
    stage2 = train(a, data2, work / "stage2", seed)
    evaluated = select(stage2, data2, {"valid": work / "selected" / "valid.json"}, work / "evaluated")
    return {"one stage": selected["valid"]["scores"], "two stages": evaluated["valid"]["scores"],
            "selection": {k: selected["valid"][k] for k in ("paragraphs_kept", "gold_paragraph_recall",
                                                           "questions_with_all_gold_kept",
                                                           "dropped_by_the_reader_next")},
            "seconds": round(time.time() - started, 1)}


def verdict(table: dict, selection: dict, chance_recall: float) -> str:
    said = []
    recall = [v["gold_paragraph_recall"] for v in selection.values()]
    learnt = min(recall) > chance_recall + 10
    said.append(f"stage one's selection {'found' if learnt else 'did NOT find'} the gold paragraphs: recall "
                f"{min(recall):.1f}-{max(recall):.1f}% against {chance_recall:.1f}% for keeping paragraphs at random"
                + ("" if learnt else "; a difference between one and two stages here comes from shorter inputs "
                                     "(fewer distractors to guess among), not from a selection that works"))
    silent = [f"{stage} / {DECODINGS[d]}" for (stage, d), t in table.items() if t["sp_f1"] == 0]
    if silent:
        said.append("no supporting fact predicted (no sentence above probability 1/2) by: " + ", ".join(silent)
                    + "; the two-paragraph decoding always returns evidence, so it wins there by construction")
    for decoding, label in DECODINGS.items():
        one, two = table[("one stage", decoding)], table[("two stages", decoding)]
        apart = beats_every_seed(two, one, lower_is_better=False)
        said.append(f"two stages against one ({label} evidence): {two['mean'] - one['mean']:+.2f} joint F1 "
                    f"(paper +4.2); {'above on every seed' if apart else 'NOT above on every seed'}")
    for stage in ("one stage", "two stages"):
        free, pair = table[(stage, "threshold")], table[(stage, "two_paragraphs")]
        apart = beats_every_seed(pair, free, lower_is_better=False)
        said.append(f"{stage}: two-paragraph evidence against threshold {pair['mean'] - free['mean']:+.2f} joint F1; "
                    f"{'above on every seed' if apart else 'NOT above on every seed'}")
    return "\n".join(f"- {s}" for s in said)


def markdown(a, table: dict, selection: dict, seeds) -> str:
    lines = [f"HotpotQA's two stages in small: {a.train_examples} train / {a.valid_examples} valid KJV bridge "
             f"questions over {a.paragraphs} paragraphs titled by names (2 gold), inputs <= {a.long} tokens; {a.layers} layers x "
             f"{a.dim}, window {a.window}, from scratch, {a.updates} updates of {a.batch_size} per stage; selection "
             f"threshold -3.0, at most 5 paragraphs; official joint F1 (%) on every valid question; spread = half "
             "the range over seeds.", ""]
    rows = [[stage, DECODINGS[decoding], f"{t['mean']:.2f} ± {t['spread']:.2f}",
             *(f"{t['seeds'][s]:.2f}" for s in seeds), f"{t['answer_f1']:.2f}", f"{t['sp_f1']:.2f}"]
            for (stage, decoding), t in table.items()]
    lines += markdown_table(["model", "evidence", "joint F1", *(f"seed {s}" for s in seeds), "answer F1", "sp F1"],
                            rows, "ll" + "r" * (len(seeds) + 3))
    recall = ", ".join(f"seed {s}: {v['gold_paragraph_recall']:.1f}% of gold paragraphs kept, "
                       f"{v['paragraphs_kept']['mean']:.2f} paragraphs per question, "
                       f"{sum(v['dropped_by_the_reader_next'].values())} questions lost their answer"
                       for s, v in selection.items())
    chance = 100 * min(5, a.paragraphs) / a.paragraphs
    lines += ["", f"Stage one's selection on valid: {recall}.", "", verdict(table, selection, chance)]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "work" / "hotpotqa_small")
    p.add_argument("--kjv", type=Path, default=KJV)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    add_flags(p, paragraphs=10, train_examples=1600, valid_examples=200, updates=300, batch_size=16, lr=1e-3,
              layers=2, dim=64, heads=4, window=16)
    p.add_argument("--long", type=int, default=512, help="tokens per input (--max-input-tokens, --max-positions)")
    p.add_argument("--vocab", type=int, default=800)
    p.add_argument("--write-docs", action="store_true", help="also write docs/results/DOCS_NAME.md")
    p.add_argument("--docs-name", default="hotpotqa_small", help="the page --write-docs writes (default: hotpotqa_small)")
    p.add_argument("--render", action="store_true",
                   help="no runs: write the page again from OUT/table.json of a finished run (with its settings)")
    a = p.parse_args(argv)
    if not 4 <= a.paragraphs <= 16:
        p.error(f"--paragraphs must be 4..16 (16 names), got {a.paragraphs}")
    return a


def summary(results: dict) -> dict:
    """{(stage, decoding): joint F1 per seed, its median and spread, mean answer and sp F1} over the seeds."""
    seeds = sorted(results)
    table = {}
    for stage, decoding in ROWS:
        per_seed = {s: results[s][stage][decoding] for s in seeds}
        table[(stage, decoding)] = {"seeds": {s: v["joint_f1"] for s, v in per_seed.items()},
                                    **summarize([v["joint_f1"] for v in per_seed.values()]),
                                    "answer_f1": sum(v["f1"] for v in per_seed.values()) / len(seeds),
                                    "sp_f1": sum(v["sp_f1"] for v in per_seed.values()) / len(seeds)}
    return table


def page(done: dict) -> str:
    """The docs page of a finished run, from its stored report (table.json) alone."""
    a = parse_args(done["argv"])  # the settings the run had
    results = {int(seed): run for seed, run in done["runs"].items()}
    seeds = sorted(results)
    text = (markdown(a, summary(results), {s: results[s]["selection"] for s in seeds}, seeds)
            + f"\ntotal {round(done['seconds'])} s on CPU. {provenance_line(done.get('provenance'))}\n\n"
            + regenerate_note(MODULE, done["argv"]) + "\n")
    # the run recorded only its load at the end (provenance): a busy machine says so at the top
    banner = quiet.load_banner(None, (done.get("provenance") or {}).get("load_average"))
    return "# HotpotQA's two stages and evidence decoding in small\n\n" + (banner + "\n\n" if banner else "") + text


def render(a, results: dict, seconds: float, argv, measured_on=None) -> str:
    """The page of a finished run: OUT/table.json and OUT/table.md, and with --write-docs the docs page
    and its JSON (docs/results/NAME.md, NAME.json: the page is rendered again from the JSON by
    longformer_tools.report.results_pages). ``measured_on``: the provenance a stored run recorded
    (None: this machine, now)."""
    table = summary(results)
    done = stamped({"settings": settings(a),
                    "argv": argv, "seconds": seconds, "table": {f"{s} / {d}": t for (s, d), t in table.items()},
                    "runs": results, "provenance": measured_on})
    done = json.loads(json.dumps(done))  # the page reads what the JSON holds (seeds as strings)
    text = page(done)
    write_page("table", done, text, a.out)
    if a.write_docs:
        write_page(a.docs_name, done, text)
    return text


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.render:  # the page again from a finished run's table.json (the text of the verdicts changed)
        done = json.loads((a.out / "table.json").read_text())
        runs = {int(seed): run for seed, run in done["runs"].items()}
        ran = parse_args(done["argv"])  # the settings the run had
        ran.out, ran.write_docs, ran.docs_name = a.out, a.write_docs, a.docs_name
        print(render(ran, runs, done["seconds"], done["argv"], done.get("provenance")), end="")
        return 0
    started = time.time()
    raw = a.out / "json"
    raw.mkdir(exist_ok=True)
    made = records(a.kjv, 0, {"train": a.train_examples, "valid": a.valid_examples}, a.paragraphs)
    for split, items in made.items():
        (raw / f"{split}.json").write_text(json.dumps(items))
    data1 = prepare(a, raw / "train.json", raw / "valid.json", a.out / "data", ["--train-sentencepiece", str(a.vocab)])
    results, errors = {}, []

    def one(seed):
        try:
            results[seed] = pipeline(a, raw, data1, seed)
        except BaseException as e:  # reported after the other seeds finish
            errors.append(f"seed {seed}: {e}")
    threads = [threading.Thread(target=one, args=(s,)) for s in a.seeds]  # one pipeline per core
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("\n".join(errors))
    print(render(a, results, time.time() - started, argv), end="")
    return 0
