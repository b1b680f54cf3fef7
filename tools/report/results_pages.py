"""Every page under ``docs/results/``, rendered again from its stored data, measuring nothing.

    python -m longformer_tools.report.results_pages           # list the pages that differ (exit 1 if any)
    python -m longformer_tools.report.results_pages --write   # re-write them all from their data

It also fills the topic pages' generated figure blocks (``doc_figures``) from the same data.

Each page is written by a command (its first lines name it) from a JSON or a folder of logs
beside it; ``RENDERERS`` renders it again the way that command does, from that data alone.
A page whose data was never stored (an experiment's table from before its JSON was kept) is in
``UNRENDERED``: it must say so in its text (``UNRENDERED_MARK``), with the commit it ran on.
tests/tools/report/test_results_pages.py renders every page and compares it with the committed
text, so a page that drifts from its data, or a page without a renderer, fails.

Run from the repository root: the pages name their data by paths relative to it.
"""
import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, Dict

from longformer_common.provenance import REPO

from .doc_figures import stale_docs
from ..gpu import compile_page

RESULTS = "docs/results"
UNRENDERED_MARK = "Not rendered from stored data"


def _bench(name: str) -> str:
    from ..bench.bench_args import load_report
    from ..bench.commands import CONTENDERS, figure1_page

    json_path, png_path = f"{RESULTS}/{name}.json", f"{RESULTS}/{name}.png"
    return figure1_page(load_report(json_path, CONTENDERS), json_path, f"{RESULTS}/{name}.md", png_path)


def _model(page: str, impls: str, name: str) -> str:
    from ..bench import commands
    from ..bench.bench_args import load_report

    json_path = f"{RESULTS}/{name}.json"
    return getattr(commands, page)(load_report(json_path, getattr(commands, impls)), json_path, f"{RESULTS}/{name}.md")


def _gpu() -> str:
    from . import gpu_results

    return gpu_results.page(Path(RESULTS) / "gpu_h200", "NVIDIA H200")


def _compile_table() -> str:
    return compile_page.seed_page()


def _layer_profile() -> str:
    from ..bench import layer_profile

    json_path = f"{RESULTS}/attention_layer_4096_profile.json"
    return layer_profile.page(json.loads(Path(json_path).read_text()), json_path,
                              f"{RESULTS}/attention_layer_4096_profile.md")


def _core_dropout() -> str:
    from ..bench import core_dropout

    json_path = f"{RESULTS}/core_dropout.json"
    return core_dropout.page(json.loads(Path(json_path).read_text()), json_path, f"{RESULTS}/core_dropout.md")


def _omp_variants(name: str) -> str:
    from ..bench import omp_variants

    json_path = f"{RESULTS}/{name}.json"
    return omp_variants.page(json.loads(Path(json_path).read_text()), json_path)


def _table5() -> str:
    from longformer_experiments.table5_small.main import page

    return page(json.loads((Path(RESULTS) / "table5_small.json").read_text()))


def _hf_accelerate(name: str) -> str:
    from ..bench.hf_accelerate import page

    return page(json.loads((Path(RESULTS) / f"{name}.json").read_text()))


def _charlm_ablation(name: str) -> str:
    from longformer_experiments.charlm_ablation.main import page

    return page(json.loads((Path(RESULTS) / f"{name}.json").read_text()))


def _learning_check(name: str) -> str:
    from longformer_experiments.learning_checks.page import render

    return render(json.loads((Path(RESULTS) / f"{name}.json").read_text()))


# python -m longformer_experiments.learning_checks --write-docs writes these (none before its first run)
LEARNING_CHECK_PAGES = ("learning_classification", "learning_qa", "learning_wikihop", "learning_hotpotqa_stage_one",
                        "learning_hotpotqa_stage_two", "ordering_hotpotqa", "learning_coref", "ordering_coref",
                        "ordering_wikihop")

RENDERERS: Dict[str, Callable[[], str]] = {
    "figure1_cpu.md": lambda: _bench("figure1_cpu"),
    "attention_layer_4096.md": lambda: _bench("attention_layer_4096"),
    "attention_layer_4096_busy.md": lambda: _bench("attention_layer_4096_busy"),
    "charlm_step_cpu.md": lambda: _model("lm_page", "LM_MODELS", "charlm_step_cpu"),
    "charlm_step_cpu_16384_ckpt.md": lambda: _model("lm_page", "LM_MODELS", "charlm_step_cpu_16384_ckpt"),
    "charlm_step_cpu_relative_ckpt.md": lambda: _model("lm_page", "LM_MODELS", "charlm_step_cpu_relative_ckpt"),
    "mlm_step_4096.md": lambda: _model("mlm_page", "MLM_MODELS", "mlm_step_4096"),
    "led_encoder_1layer.md": lambda: _model("led_page", "ENCODERS", "led_encoder_1layer"),
    "charlm_ablation_relative.md": lambda: _charlm_ablation("charlm_ablation_relative"),
    "core_dropout.md": _core_dropout,
    "train_step_quickstart_omp.md": lambda: _omp_variants("train_step_quickstart_omp"),
    "attention_layer_4096_profile.md": _layer_profile,
    "table5_small.md": _table5,
    "hf_accelerate_cpu.md": lambda: _hf_accelerate("hf_accelerate_cpu"),
    "hf_accelerate_cpu_1thread.md": lambda: _hf_accelerate("hf_accelerate_cpu_1thread"),
    "hf_accelerate_cpu_short.md": lambda: _hf_accelerate("hf_accelerate_cpu_short"),
    "onnx_cpu.md": lambda: _hf_accelerate("onnx_cpu"),
    "gpu_h200.md": _gpu,
    "triton_compile.md": _compile_table,
    **{f"{name}.md": (lambda name=name: _learning_check(name)) for name in LEARNING_CHECK_PAGES},
}
# pages of experiments that kept no JSON: each says so, with its commit (the test checks the mark); none
# now: the last ones (global_ablation, wikihop_small, finetune_kjv, quickstart_report) were retired
UNRENDERED = ()
# pages that may not exist before their command's first run: scripts/regenerate_timings.sh writes
# core_dropout.md, attention_layer_4096_profile.md and train_step_quickstart_omp.md,
# scripts/regenerate_pages.sh led_encoder_1layer.md and hf_accelerate_cpu_short.md, `bash recipes/table5_small.sh` (--results-page)
# table5_small.md
FIRST_WRITTEN_BY_REGENERATE = ("core_dropout.md", "attention_layer_4096_profile.md", "train_step_quickstart_omp.md",
                               "led_encoder_1layer.md", "hf_accelerate_cpu_short.md", "table5_small.md",
                               *(f"{name}.md" for name in LEARNING_CHECK_PAGES))


def pages() -> list:
    """The pages to render: every renderer's page that exists (a timing page appears once
    scripts/regenerate_timings.sh has run)."""
    return sorted(page for page in RENDERERS
                  if page not in FIRST_WRITTEN_BY_REGENERATE or (REPO / RESULTS / page).exists())


@contextlib.contextmanager
def _in_repo():
    here = os.getcwd()
    os.chdir(REPO)
    try:
        yield
    finally:
        os.chdir(here)


def render(page: str) -> str:
    """The text of ``page`` (a file name under docs/results) rendered from its data."""
    with _in_repo():
        return RENDERERS[page]()


def committed(page: str) -> str:
    return (REPO / RESULTS / page).read_text()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="re-write every page from its data")
    args = parser.parse_args(argv)
    differ = []
    for page in pages():
        text = render(page)
        if text != committed(page):
            differ.append(page)
            if args.write:
                (REPO / RESULTS / page).write_text(text)
    for page in differ:
        print(f"{'rewrote' if args.write else 'differs from its data'}: {RESULTS}/{page}")
    docs = stale_docs(write=args.write)
    for path in docs:
        print(f"{'rewrote the figure blocks of' if args.write else 'figure blocks differ from their data'}: "
              f"{path.relative_to(REPO)}")
    return 1 if (differ or docs) and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
