"""A learning check's page: its pass criterion first (stated before any number), the model beside
its controls (mean ± spread over seeds, runner.py's convention), the learning curve as a PNG,
the budget, seeds, the load average during training and the commit.

A result is plain JSON (``page`` renders it again without training):
  name, title, about (what the task is), criterion (the sentence), passed (bool or None for an
  ordering), metric (what the numbers are), rows [{label, kind: model|baseline|oracle|row,
  values: {seed: value}}], curves {label: [[update, value], ...]}, verdicts [sentences],
  budget {...}, seeds [...], load {max, mean, samples}, provenance {...}, seconds, argv.
"""
import json
from pathlib import Path
from typing import Dict, List, Optional

from longformer_common.provenance import provenance_line
from longformer_experiments.learning_checks.training import BUSY_LOAD
from longformer_experiments.runner import markdown_table, regenerate_note, summarize

MODULE = "longformer_experiments.learning_checks"


def row_summary(values: Dict[str, float]) -> Dict[str, float]:
    return summarize(list(values.values()))


def ordering(better: dict, worse: dict) -> str:
    """"holds" when every seed of ``better`` beats every seed of ``worse`` (higher is better),
    "reversed" when the other way round, else "undetermined" (the ranges overlap: the gap is
    inside the spread)."""
    b, w = row_summary(better["values"]), row_summary(worse["values"])
    if min(len(better["values"]), len(worse["values"])) < 2:
        return "undetermined"  # one seed: no spread to tell a gap from seed noise
    if b["min"] > w["max"]:
        return "holds"
    if w["min"] > b["max"]:
        return "reversed"
    return "undetermined"


def ordering_sentence(claim: str, better: dict, worse: dict) -> str:
    b, w = row_summary(better["values"]), row_summary(worse["values"])
    said = {"holds": "holds (every seed above every seed)", "reversed": "is REVERSED here (every seed below every seed)",
            "undetermined": "is undetermined (the seed ranges overlap, or one seed only: the gap is not told from "
                                    "seed noise)"}
    return f"{claim}: {b['mean'] - w['mean']:+.2f} points on the mean; the ordering {said[ordering(better, worse)]}."


def plot(curves: Dict[str, List[List[float]]], metric: str, title: str, path: Path) -> None:
    """The validation values against updates, one line per curve, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6, 3.6))
    for label, points in curves.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=label)
    axes.set_xlabel("updates")
    axes.set_ylabel(metric)
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def markdown(result: dict, image: Optional[str]) -> str:
    seeds = [str(s) for s in result["seeds"]]
    lines = [f"# {result['title']}", ""]
    load = result.get("load") or {}
    if load.get("max", 0) > BUSY_LOAD:
        lines += [f"> **Busy machine:** the load average reached {load['max']:.1f} during training (mean "
                  f"{load['mean']:.1f}; above {BUSY_LOAD:.0f} on this machine other jobs shared the cores), so the "
                  "seconds below are not this code's speed; the learning itself does not depend on it.", ""]
    kind = "Pass criterion" if result.get("passed") is not None else "Claim tested"
    lines += [f"**{kind}** (stated before the numbers, checked by the command): {result['criterion']}", "",
              result["about"], ""]
    header = ["", "kind", f"{result['metric']} (mean ± spread)", *(f"seed {s}" for s in seeds)]
    rows = []
    for row in result["rows"]:
        s = row_summary(row["values"])
        rows.append([row["label"], row["kind"], f"{s['mean']:.2f} ± {s['spread']:.2f}",
                     *(f"{row['values'][x]:.2f}" if x in row["values"] else "-" for x in seeds)])
    lines += markdown_table(header, rows, "ll" + "r" * (len(seeds) + 1)) + [""]
    if result.get("passed") is not None:
        lines += [f"**Result: {'PASSED' if result['passed'] else 'MISSED'}**: {result['criterion_check']}", ""]
    lines += [f"- {v}" for v in result.get("verdicts", [])] + [""]
    if image:
        lines += [f"![learning curve]({image})", "", "Learning curve: the validation values logged while training.", ""]
    budget = ", ".join(f"{k} {v}" for k, v in result["budget"].items())
    lines += [f"Budget: {budget}. Seeds: {', '.join(seeds)}. Spread = half the range over seeds. Total "
              f"{result['seconds']:.0f} s; load average during training: peak {load.get('max', 0):.1f}, mean "
              f"{load.get('mean', 0):.1f} ({load.get('samples', 0)} samples).", "",
              provenance_line(result.get("provenance")), "", regenerate_note(MODULE, result["argv"])]
    return "\n".join(lines) + "\n"


def render(result: dict) -> str:
    """The page's text from its stored result alone (longformer_tools.report.results_pages renders
    it again this way); the curve is NAME.png beside it."""
    return markdown(result, f"{result['name']}.png" if result.get("curves") else None)


def write(result: dict, folder: Path) -> Path:
    """NAME.json, NAME.png (when there are curves) and NAME.md into ``folder``; the page's path."""
    folder.mkdir(parents=True, exist_ok=True)
    name = result["name"]
    (folder / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    if result.get("curves"):
        plot(result["curves"], result["metric"], result["title"], folder / f"{name}.png")
    page = folder / f"{name}.md"
    page.write_text(render(json.loads((folder / f"{name}.json").read_text())))
    return page
