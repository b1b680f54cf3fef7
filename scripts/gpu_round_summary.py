"""summary.md of a scripts/gpu_round.sh run: what a person reads first. Standard library only
(it runs even when the install stage failed).

    python3 scripts/gpu_round_summary.py OUTDIR     # writes OUTDIR/summary.md from what is there

Reads OUTDIR/all.log (each stage's "=== NAME: rc RC at S s" line and the header), checks.json,
suite.log, train_steps.json and bench.json, each when present; a missing one is said so.
"""
import json
import os
import re
import sys

STAGES = ("install", "checks", "suite", "steps", "bench")
MEANING = {0: "ok", 124: "cut at its time limit", 137: "killed at its time limit", 5: "no tests ran"}


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def stage_lines(log: str):
    ends = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
            re.finditer(r"^=== (\w+): rc (\d+) at (\d+) s", log, flags=re.M)}
    starts = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
              re.finditer(r"^=== (\w+) \(limit (\d+) s, at (\d+) s\)", log, flags=re.M)}
    lines = ["| stage | limit s | took s | rc | |", "|---|---|---|---|---|"]
    for name in STAGES:
        if name not in starts:
            lines.append(f"| {name} | | | | did not start |")
            continue
        limit, began = starts[name]
        rc, ended = ends.get(name, (None, None))
        took = "" if ended is None else ended - began
        said = "no end line (the round was cut)" if rc is None else MEANING.get(rc, "FAILED")
        lines.append(f"| {name} | {limit} | {took} | {'' if rc is None else rc} | {said} |")
    return lines


def checks_lines(merged):
    if not merged:
        return ["checks.json: missing"]
    records = [r for report in merged.values() for r in report.get("checks", [])]
    failed = [r for r in records if not r.get("ok")]
    lines = [f"{len(merged)} check processes, {len(records)} records, **{len(failed)} failed**"]
    for r in failed[:10]:
        lines.append(f"- FAILED {r.get('case')} {r.get('impl')} {r.get('dtype')} p={r.get('dropout')} "
                     f"{r.get('tensor')}: {r.get('rel_err')} > {r.get('tol')}")
    return lines


def suite_lines(path):
    try:
        text = open(path).read()
    except OSError:
        return ["suite.log: missing"]
    counts = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    failed = [line for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return [f"`{counts[-1].strip('= ')}`" if counts else "no pytest result line (cut short?)"] + \
        [f"- {line[:300]}" for line in failed[:20]]


def steps_lines(report):
    if not report:
        return ["train_steps.json: missing"]
    lines = [f"bf16 matmul {report['matmul_size']}^3: {report['matmul_tflops']:.1f} TFLOP/s (same run)", "",
             "| row | N | checkpointing | batch | step ms (median, min-max) | tokens/s | peak GiB | MFU | status |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        ms = (f"{r['step_ms_median']:.1f} ({r['step_ms_min']:.1f}-{r['step_ms_max']:.1f})"
              if r["step_ms_median"] else "")
        tokens = f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else ""
        peak = f"{r['peak_mb'] / 1024:.1f}" if r["peak_mb"] else ""
        mfu = f"{r['mfu']:.1%}" if r["mfu"] else ""
        lines.append(f"| {r['name']} | {r['length']} | {'on' if r['checkpointing'] else 'off'} | {r['batch']} | {ms} | "
                     f"{tokens} | {peak} | {mfu} | {r['status']} {r['note']} |")
    ours = {r["checkpointing"]: r for r in report["rows"] if r["name"] == "longformer_mlm" and r["tokens_per_s"]}
    theirs = {r["checkpointing"]: r for r in report["rows"] if r["name"] == "transformers_mlm" and r["tokens_per_s"]}
    for ckpt in sorted(set(ours) & set(theirs)):
        lines.append(f"\nlongformer_mlm / transformers_mlm tokens/s, checkpointing {'on' if ckpt else 'off'}: "
                     f"**{ours[ckpt]['tokens_per_s'] / theirs[ckpt]['tokens_per_s']:.2f}x** (issue 42's goal: >= 2x)")
    return lines


def bench_lines(report):
    bench = (report or {}).get("benchmark")
    if not bench:
        return ["bench.json: missing"]
    lines = ["| N | B | G | dtype | pass | contender | ms | useful TFLOP/s |", "|---|---|---|---|---|---|---|---|"]
    for r in bench.get("rows", []):
        if r.get("dropout", 0) == 0 and r.get("ms"):
            lines.append(f"| {r.get('length')} | {r.get('batch')} | {r.get('globals', r.get('global_tokens'))} | "
                         f"{r.get('dtype')} | {r.get('passes')} | {r.get('contender')} | {r['ms']:.3f} | "
                         f"{r.get('tflops') or 0:.1f} |")
    return lines


def summary(folder: str) -> str:
    try:
        log = open(os.path.join(folder, "all.log")).read()
    except OSError:
        log = ""
    header = [line for line in log.splitlines() if line.startswith(("commit ", "python ", "device "))]
    parts = ["# GPU round: summary (read first)", "", *header, "", "## Stages", "", *stage_lines(log),
             "", "## Kernel checks (every dtype, production shapes and the grid)", "",
             *checks_lines(_load(os.path.join(folder, "checks.json"))),
             "", "## The suite on CUDA (pytest --device cuda)", "", *suite_lines(os.path.join(folder, "suite.log")),
             "", "## Training steps (longformer-bench train-steps)", "",
             *steps_lines(_load(os.path.join(folder, "train_steps.json"))),
             "", "## Attention core against FlexAttention (bf16, no dropout)", "",
             *bench_lines(_load(os.path.join(folder, "bench.json"))),
             "", "Everything printed: all.log. Files: " + ", ".join(sorted(os.listdir(folder)))]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    out = sys.argv[1]
    text = summary(out)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
