"""Figures of the topic pages rendered from a results page's data: the generated blocks
``<!-- figure: PAGE KEY -->text<!-- /figure -->`` of README.md, recipes/README.md and docs/*.md.

``python -m longformer_tools.report.results_pages --write`` fills every block with what
``FIGURES[(PAGE, KEY)]`` renders from the data under docs/results/ (measuring nothing);
without --write it lists the blocks whose text differs. tests/test_figures_in_docs.py checks that
every block is current and that its PAGE and KEY are known.
"""
import json
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from longformer_common.provenance import REPO

from .figure_check import BLOCK, doc_files

GPU = REPO / "docs" / "results" / "gpu_h200"


def _lease4_ab() -> List[dict]:
    from .gpu_results import log_block
    from .lease_ratios import ab_rows

    return ab_rows(log_block(GPU / "lease4.log", "=== ab (", "=== ab:"))


def _flex_verdict() -> str:
    from .lease_ratios import flex_verdict

    return flex_verdict(GPU / "lease4.log", _lease4_ab())


def _ab_summary() -> str:
    from .lease_ratios import ab_summary

    return ab_summary(_lease4_ab())


def _flex_summary() -> str:
    from .lease_ratios import flex_summary

    return flex_summary(GPU / "lease4.log", _lease4_ab())


RESULTS = REPO / "docs" / "results"
FINETUNING_CHECKS = ("learning_classification", "learning_qa", "learning_wikihop", "learning_hotpotqa_stage_one",
                     "learning_hotpotqa_stage_two", "ordering_wikihop", "ordering_hotpotqa")
COREF_CHECKS = ("learning_coref", "ordering_coref")


def _learning_summary(names: Tuple[str, ...]) -> str:
    """A table of the learning checks' pages (``python -m longformer_experiments.learning_checks``):
    per check the model's mean ± spread beside its controls and the verdict; per ordering its
    verdict sentences. A page not yet written says so."""
    from longformer_experiments.learning_checks.page import row_summary

    lines = ["", "", "| page | model, mean ± spread | controls | verdict |", "|---|---|---|---|"]
    for name in names:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            lines.append(f"| {name}.md | not yet measured | | |")
            continue
        result = json.loads(path.read_text())

        def said(row):
            s = row_summary(row["values"])
            return f"{row['label']} {s['mean']:.1f} ± {s['spread']:.1f}"
        models = "; ".join(said(r) for r in result["rows"] if r["kind"] == "model")
        controls = "; ".join(said(r) for r in result["rows"] if r["kind"] != "model")
        if result.get("passed") is None:
            verdict = " ".join(result.get("verdicts", []))
        else:
            verdict = f"{'PASSED' if result['passed'] else 'MISSED'}: {result['criterion_check']}"
        lines.append(f"| [{name}.md](results/{name}.md) ({result['metric']}, seeds "
                     f"{', '.join(map(str, result['seeds']))}) | {models} | {controls} | {verdict} |")
    return "\n".join(lines) + "\n\n"


FIGURES: Dict[Tuple[str, str], Callable[[], str]] = {
    ("learning_checks", "finetuning"): lambda: _learning_summary(FINETUNING_CHECKS),
    ("learning_checks", "coreference"): lambda: _learning_summary(COREF_CHECKS),
    ("gpu_h200.md", "flex_band_verdict"): _flex_verdict,
    ("gpu_h200.md", "three_loop_ratios"): _ab_summary,
    ("gpu_h200.md", "flex_fairly"): _flex_summary,
}


def fill(text: str) -> str:
    """``text`` with every block's contents replaced by what its renderer gives (KeyError: a block
    naming an unknown page or key)."""
    return BLOCK.sub(lambda m: f"<!-- figure: {m.group(1)} {m.group(2)} -->{FIGURES[(m.group(1), m.group(2))]()}"
                               "<!-- /figure -->", text)


def unknown_blocks(root: Path = REPO) -> List[str]:
    """"path: PAGE KEY" of each block no renderer knows."""
    return [f"{path.relative_to(root)}: {m.group(1)} {m.group(2)}" for path in doc_files(root) if path.exists()
            for m in BLOCK.finditer(path.read_text()) if (m.group(1), m.group(2)) not in FIGURES]


def stale_docs(root: Path = REPO, write: bool = False) -> List[Path]:
    """The doc files whose blocks differ from their data (re-written with ``write``)."""
    differ = []
    for path in doc_files(root):
        if not path.exists():
            continue
        text = path.read_text()
        filled = fill(text)
        if filled != text:
            differ.append(path)
            if write:
                path.write_text(filled)
    return differ
