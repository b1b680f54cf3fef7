"""ROUGE of the LED demo's systems on the test passages, against the lead baseline."""
import json
import random
import sys
from pathlib import Path

from longformer_experiments.led_demo.task import sentences_of
from longformer_experiments.runner import markdown_table

def lead(source: str) -> str:
    """The lead baseline: the passage's first sentence."""
    return sentences_of(source)[0]


def detokenize(pieces: str) -> str:
    """sentencepiece pieces as fairseq prints them ("▁And ▁the ...") -> text."""
    return "".join(pieces.split()).replace("\u2581", " ").strip()


def hypotheses(log: Path):
    """{test index: detokenized best hypothesis} from a fairseq-generate log."""
    found = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            index, _, text = line[2:].split("\t", 2)
            found[int(index)] = detokenize(text)
    return found


def rouge_per_example(predictions, references):
    """[{rouge1, rouge2, rougeL: F1 x100}] per example, rouge-score with its stemmer."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    return [{name: 100 * score.fmeasure for name, score in scorer.score(reference, prediction).items()}
            for prediction, reference in zip(predictions, references)]


def rouge(predictions, references):
    """Mean ROUGE-1/2/L F1 (x100)."""
    rows = rouge_per_example(predictions, references)
    return {name: round(sum(r[name] for r in rows) / max(1, len(rows)), 2) for name in ("rouge1", "rouge2", "rougeL")}


def paired_bootstrap(a, b, samples: int = 1000, seed: int = 1):
    """Mean of a - b (per-example scores) and its 95% bootstrap interval (examples resampled)."""
    rng = random.Random(seed)
    n = len(a)
    diffs = [x - y for x, y in zip(a, b)]
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    return {"mean": round(sum(diffs) / n, 2), "low": round(means[int(0.025 * samples)], 2),
            "high": round(means[int(0.975 * samples) - 1], 2)}


def score(args) -> None:
    rows = [json.loads(line) for line in open(args.work / "data" / "test.jsonl", encoding="utf-8")]
    references = [r["target"] for r in rows]
    outputs = {"lead (first sentence)": [lead(r["source"]) for r in rows]}
    missing = {}
    for spec in args.system:
        name, _, path = spec.partition("=")
        found = hypotheses(Path(path))
        missing[name] = len(rows) - len(found)
        if missing[name]:  # fairseq-generate skipped some: score them as empty, and say so
            print(f"warning: {name}: {missing[name]} of {len(rows)} test examples have no hypothesis", file=sys.stderr)
        outputs[name] = [found.get(i, "") for i in range(len(rows))]
    per_example = {name: rouge_per_example(texts, references) for name, texts in outputs.items()}
    results = {"test_examples": len(rows), "systems": {}, "rougeL_differences": {}}
    for name, scores in per_example.items():
        results["systems"][name] = {k: round(sum(s[k] for s in scores) / len(scores), 2)
                                    for k in ("rouge1", "rouge2", "rougeL")}
        if name in missing:
            results["systems"][name]["missing"] = missing[name]
    names = list(outputs)
    for i, first in enumerate(names[1:], 1):  # each model against the systems before it
        for second in names[:i]:
            results["rougeL_differences"][f"{first} - {second}"] = paired_bootstrap(
                [s["rougeL"] for s in per_example[first]], [s["rougeL"] for s in per_example[second]])
    example = min(range(len(rows)), key=lambda i: len(rows[i]["source"]))
    results["example"] = {"book": rows[example]["book"], "target": rows[example]["target"]}
    results["example"].update({name: texts[example] for name, texts in outputs.items()})
    lines = [f"ROUGE F1 (x100, rouge-score with stemming) on {len(rows)} test passages", ""]
    lines += markdown_table(["system", "ROUGE-1", "ROUGE-2", "ROUGE-L"],
                            [[name, f"{s['rouge1']:.2f}", f"{s['rouge2']:.2f}", f"{s['rougeL']:.2f}"]
                             for name, s in results["systems"].items()], "lrrr")
    lines += ["", "ROUGE-L differences (mean over the test passages, 95% paired bootstrap interval):"]
    lines += [f"- {pair}: {d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"
              for pair, d in results["rougeL_differences"].items()]
    lines += ["", f"example (the shortest test passage, {rows[example]['book']}):"]
    lines += [f"- {key}: {value}" for key, value in results["example"].items() if key != "book"]
    if args.regenerate:
        lines += ["", f"Regenerate: `{args.regenerate}` (from the repository root)."]
    (args.work / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.work / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))
