"""The GPU results page, Figure 1 on CUDA and the README's GPU table, from what a GPU lease
brought back (``scripts/gpu_round.sh``: gpu_check's benchmark JSONs, gpu_tune's JSONs, the logs).

    python -m longformer_tools.report.gpu_results docs/results/gpu_h200 --device "NVIDIA H200"

Reads FOLDER/bench_*.json, FOLDER/tune_round*.json and FOLDER/lease*.log; writes
docs/results/gpu_h200.md (page), docs/results/figure1_cuda.json and .png (time and peak memory
against N, from the benchmark rows). Nothing is measured here: every number is a copy of a
number the GPU printed, so the page can be rebuilt without a GPU.
"""
import argparse
import json
import re
from pathlib import Path
from typing import Dict, List

from longformer_kernels import attention_flops

from .lease_ratios import ab_rows, ab_summary, flex_summary

CHECK_LINE = re.compile(r"^(\S+)\s+(fp32|fp16|bf16)\s+(\d\.\d)\s+(oracle_vs_reference|torch|triton)"
                        r"\s+(\S+)\s+(ok|FAIL.*)$")
LABELS = {"triton": "ours, Triton", "torch": "ours, PyTorch path", "flex": "FlexAttention (global mask read from a tensor)",
          "sdpa_flash": "dense SDPA (flash, full N x N)"}
# the first lease's "n1" is the second's "n1_one_token": renamed when its zero gradients got an
# absolute measure (rounding noise over a zero norm); the later lines replace the earlier ones
RENAMED = {"n1": "n1_one_token"}
EXPECTED_CASES = ("prod_n4096_w256_1_global", "prod_n4096_w256_80_global")  # gpu_check.PRODUCTION
COLORS = {"triton": "tab:green", "torch": "tab:blue", "flex": "tab:purple", "sdpa_flash": "tab:red"}


def check_results(logs: List[Path]) -> Dict[tuple, dict]:
    """(case, dtype, dropout, impl) -> {"ratio", "result", "log"}: the last line of each from the
    logs, in order (a later lease's line replaces an earlier one: the metric fix of n1)."""
    found = {}
    for log in logs:
        for line in log.read_text().splitlines():
            match = CHECK_LINE.match(line.strip())
            if match:
                case, dtype, drop, impl, ratio, result = match.groups()
                case = RENAMED.get(case, case)
                found[(case, dtype, float(drop), impl)] = dict(ratio=ratio, result=result, log=log.name)
    return found


def tiles_note(logs: List[Path]) -> List[str]:
    """The benchmark's tiles (the sweep's value of LONGFORMER_TRITON_TILES, from the log) against
    the committed 16-bit D = 64 tiles: which kernels ran with other tiles than a user gets."""
    from longformer_kernels import block_config

    used = None
    for log in logs:
        for line in log.read_text().splitlines():
            if line.startswith("tiles for the benchmark: "):
                used = line.split(": ", 1)[1].strip()
    if not used or "=" not in used:
        return []
    differ = []
    for item in used.split(","):
        kernel, tiles = item.split("=")
        c = block_config(64, 2, False, f"_{kernel}_kernel")
        committed = f"{c.block_m}x{c.block_n}x{c.num_warps}x{c.num_stages}"
        if committed != tiles:
            differ.append(f"{kernel} ran with {tiles}, commits {committed}")
    return ["", f"Tiles: the benchmark ran with the first sweep's per-kernel winners (`{used}`); the "
            "committed tiles for 16-bit inputs with D <= 64 are the same"
            + (" except: " + "; ".join(differ) + " (a difference within the sweeps' spread)." if differ else ".")]


def log_block(log: Path, start: str, end: str) -> List[str]:
    """The lines of ``log`` after the first one starting with ``start``, up to the next one
    starting with ``end`` (exclusive); [] when ``start`` is missing."""
    lines = log.read_text().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if first is None:
        return []
    block = []
    for line in lines[first + 1:]:
        if line.startswith(end):
            break
        block.append(line)
    return block


def lines_matching(log: Path, pattern: str) -> List[str]:
    return [line for line in log.read_text().splitlines() if re.match(pattern, line)]


def later_leases(folder: Path) -> List[str]:
    """This page's account of leases 3 and 4 (``lease3.sh``, ``lease4.sh``): copies of what they
    printed, with what each shows."""
    page = []
    lease3, lease4 = folder / "lease3.log", folder / "lease4.log"
    if lease3.exists():
        page += ["", "## Lease 3: every check in every dtype, production shapes included; memcheck", "",
                 "`lease3.sh`: the six check processes side by side (production shapes and the grid, one dtype "
                 "each; their lines are in the table above), then compute-sanitizer's memcheck over the small "
                 "grid cases in fp16 (padding, dilation 1/2/3, 0 to 39 global tokens, causal; every kernel "
                 "including the split global rows; each tensor its own allocation, "
                 "PYTORCH_NO_CUDA_MEMORY_CACHING=1):", "", "```"]
        page += lines_matching(lease3, r"=== checks merged|========= ERROR SUMMARY")
        page += ["```"]
    if lease4.exists():
        page += ["", "## Lease 4: the forward's three-loop band walk, and FlexAttention written fairly", "",
                 "The band kernels were changed to walk their tiles in three loops (edge, interior, edge; "
                 "``_interior_range``), the interior ones masked only by their keys' kinds. Every check passed "
                 "with it (its lines replace lease 3's in the table above). Old kernels (the commit before) "
                 "against new, alternating rounds in one process, bf16, committed tiles:", "", "```"]
        ab = log_block(lease4, "=== ab (", "=== ab:")
        page += ab + ["```", ""]
        page += [ab_summary(ab_rows(ab)) + " "
                 "The commit keeps the three loops in the forward only; the backward kernels walk one "
                 "loop again, doing per tile exactly what the old kernels timed above did (only the way an "
                 "interior tile is recognised changed; it is checked exhaustively in the interpreter). That "
                 "combination was not timed on a GPU: the lease time was spent.", "",
                 "FlexAttention, the same compiled call with its mask written three ways (B = 8, N = 16,384; "
                 "`flex_variants.py`; `gpu_bench.flex_contender` is the benchmark's contender before this "
                 "commit; the 60 s limit ended the run before the G = 8 range form):", "", "```"]
        page += lines_matching(lease4, r"G=\d ")
        page += ["```", "",
                 flex_summary(lease4, ab_rows(ab)) + " `gpu_bench.flex_contender` now writes the mask the fast way "
                 "(band alone, or a position range for the first G tokens).", "",
                 "Where a small call's time goes (B = 1, N = 4,096, bf16; `host_profile.py`): the host, not the "
                 "GPU:", "", "```"]
        page += lines_matching(lease4, r"(fwd|fwd\+bwd) +host ")
        page += ["```", "", "Tile sweep of the new kernels (bf16, B = 8, N = 16,384, G = 8), best per kernel:", "",
                 "```"]
        page += [line for line in log_block(lease4, "=== tune (", "=== tune:") if line.startswith("best _")]
        page += ["```"]
    return page


def spread_note(rows: List[dict]) -> str:
    """How the cells read: "median (min-max)" where the JSON stores every timed call, else a
    sentence saying that it holds no spread."""
    if any(r.get("ms_all") for r in rows):
        return "Cells: median (min-max) of the timed calls."
    return ("Cells: medians; the benchmark JSON stores only the median of each cell, not its timed calls, "
            "so no range can be given.")


def bench_rows(folder: Path) -> List[dict]:
    rows = []
    for path in sorted(folder.glob("bench_*.json")):
        report = json.loads(path.read_text())
        bench = report["benchmark"]
        for row in bench["rows"]:
            rows.append(dict(row, source=path.name, matmul=bench["matmul_tflops"][row["dtype"]]))
    return rows


def useful_tflops(row: dict) -> float:
    """The row's useful TFLOP/s by the project's one count (``longformer_kernels.flops``), from
    its time: the stored ``tflops`` of runs before that count (band only, fwd+bwd 3.5x) is not used."""
    backward = row["passes"] == "fwd+bwd"
    useful = attention_flops(row["batch"], row["heads"], row["length"], row["head_dim"], row["window"],
                             row["globals"], backward)
    return useful / (row["ms"] * 1e-3) / 1e12


def _cell(row) -> str:
    if row is None:
        return "-"
    if "ms" not in row:
        return "skipped" if "dropout" in row.get("skipped", "") else "n/a"
    calls = row.get("ms_all")
    return f"{row['ms']:.3f} ({min(calls):.3f}-{max(calls):.3f})" if calls else f"{row['ms']:.3f}"


def bench_table(rows: List[dict], dtype: str) -> List[str]:
    names = ["triton", "flex", "sdpa_flash", "torch"]
    present = [n for n in names if any(r["contender"] == n and r["dtype"] == dtype for r in rows)]
    head = ("| B | N | G | dropout | pass | " + " | ".join(f"{LABELS[n]} ms" for n in present)
            + " | ours TFLOP/s (of matmul) | Flex / ours | dense / ours |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    keys = sorted({(r["batch"], r["length"], r["globals"], r["dropout"], r["passes"])
                   for r in rows if r["dtype"] == dtype},
                  key=lambda k: (-k[1], -k[0], k[2], k[3], k[4] != "fwd"))
    for key in keys:
        by = {r["contender"]: r for r in rows
              if r["dtype"] == dtype and (r["batch"], r["length"], r["globals"], r["dropout"], r["passes"]) == key}
        ours = by.get("triton")
        speed = "-"
        flex = dense = "-"
        if ours and "ms" in ours:
            tflops = useful_tflops(ours)
            speed = f"{tflops:.0f} ({tflops / ours['matmul']:.1%})"
            if "ms" in by.get("flex", {}):
                flex = f"{by['flex']['ms'] / ours['ms']:.2f}"
            if "ms" in by.get("sdpa_flash", {}):
                dense = f"{by['sdpa_flash']['ms'] / ours['ms']:.2f}"
        b, n, g, p, passes = key
        lines.append(f"| {b} | {n:,} | {g} | {p} | {passes} | " + " | ".join(_cell(by.get(c)) for c in present)
                     + f" | {speed} | {flex} | {dense} |")
    return lines


def tune_table(path: Path) -> List[str]:
    report = json.loads(path.read_text())
    kernels = sorted({k for r in report["results"] for k in r.get("kernels_ms", {}) if k.startswith("_")})
    short = [k.strip("_").replace("_kernel", "") for k in kernels]
    lines = ["| tiles BMxBNxwarpsxstages | fwd ms | fwd+bwd ms | " + " | ".join(short) + " |",
             "|" + "---|" * (3 + len(short))]
    best = {k: min(r["kernels_ms"][k] for r in report["results"] if k in r.get("kernels_ms", {})) for k in kernels}
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {r['tiles']} | error: {r['error'][:80]} |" + " |" * (1 + len(short)))
            continue
        cells = []
        for k in kernels:
            ms = r["kernels_ms"].get(k)
            cells.append("-" if ms is None else (f"**{ms:.3f}**" if ms == best[k] else f"{ms:.3f}"))
        lines.append(f"| {r['tiles']} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | " + " | ".join(cells) + " |")
    return lines


def figure1(rows: List[dict], json_path: Path, png_path: Path, device: str) -> None:
    """Time and peak memory against N: bf16, G = 0, no dropout, B = 1 and 8, forward+backward."""
    points = [dict(contender=r["contender"], batch=r["batch"], length=r["length"], passes=r["passes"],
                   ms=r.get("ms"), peak_mib=r.get("peak_mib"), skipped=r.get("skipped"))
              for r in rows if r["dtype"] == "bf16" and r["globals"] == 0 and r["dropout"] == 0.0]
    json_path.write_text(json.dumps(dict(
        device=device, dtype="bf16", heads=12, head_dim=64, window=256, global_tokens=0, dropout=0.0,
        source="docs/results/gpu_h200/bench_bf16.json (gpu_check benchmark, CUDA events, median of 5)",
        points=points), indent=1) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for name in ("triton", "flex", "sdpa_flash", "torch"):
        for batch, style in ((1, "--"), (8, "-")):
            mine = sorted((p for p in points if p["contender"] == name and p["batch"] == batch
                           and p["passes"] == "fwd+bwd" and p["ms"] is not None), key=lambda p: p["length"])
            if not mine:
                continue
            lengths = [p["length"] for p in mine]
            axes[0].plot(lengths, [p["ms"] for p in mine], style, marker="o", color=COLORS[name],
                         label=f"{LABELS[name]}, B={batch}")
            axes[1].plot(lengths, [p["peak_mib"] for p in mine], style, marker="o", color=COLORS[name],
                         label=f"{LABELS[name]}, B={batch}")
    for ax, label in zip(axes, ("forward+backward time (ms)", "peak memory beyond inputs (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Self-attention, w = 256, H = 12, D = 64, bf16, {device}")
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    args = parser.parse_args(argv)
    figure1(bench_rows(args.folder), args.out / "figure1_cuda.json", args.out / "figure1_cuda.png", args.device)
    (args.out / "gpu_h200.md").write_text(page(args.folder, args.device))
    return 0


# The commits whose kernels each lease ran (from git's history: the GPU machines record no commit).
# Main's kernels are newer than all of them: nothing since has run on a GPU.
LEASE_COMMITS = (
    "Which kernels ran (the leases recorded no commit; from git's history): leases 1 and 2 (`bench_bf16.json`, "
    "`bench_fp16.json`, the tile sweeps) ran the kernels of commit 30e53a1 with the changes committed as "
    "89eac93; lease 3 those of 340805b with the changes committed as fbd6e03; lease 4 timed 340805b against "
    "fbd6e03's forward. **Every number on this page describes kernels older than main's**: 13af8cd (global-key "
    "tiles of 16 slots in the band forward and dq) and later changes have not run on a GPU.")


def page(folder: Path, device: str) -> str:
    """The page's markdown, from the files in ``folder`` alone (the test renders it again)."""
    logs = sorted(folder.glob("lease*.log"))
    checks = check_results(logs)
    rows = bench_rows(folder)
    passed = sum(v["result"] == "ok" for v in checks.values())
    failed = [(k, v) for k, v in checks.items() if v["result"] != "ok"]
    page = [f"# The attention on a GPU: {device}", "",
            "Built by `python -m longformer_tools.report.gpu_results docs/results/gpu_h200 --device \"NVIDIA H200\"` "
            "from the files four leases brought back (`gpu_h200/`: the logs of `scripts/gpu_round.sh` and of the "
            "later leases' scripts `lease2.sh` to `lease4.sh`, the benchmark and tile-sweep JSONs). Nothing on "
            "this page was measured on the CPU.", "", LEASE_COMMITS, "",
            "## Checks", "",
            f"{passed} check lines passed, {len(failed)} failed (one line: one implementation, case, dtype and "
            "dropout, all seven tensors; error ||x - x64|| / ||x64|| against the PyTorch path in float64, "
            "and that oracle against the dense reference).", ""]
    columns = [(d, p) for d in ("fp32", "fp16", "bf16") for p in (0.0, 0.1)]
    page += ["Per cell: the Triton kernel's worst error over the seven tensors as a fraction of its tolerance "
             "(the PyTorch path's and the oracle's lines are in the logs); `not run`: the lease ended first.", "",
             "| case | " + " | ".join(f"{d} p={p}" for d, p in columns) + " |", "|---" * (1 + len(columns)) + "|"]
    cases = list(dict.fromkeys(k[0] for k in checks))
    for case in cases + [c for c in EXPECTED_CASES if c not in cases]:
        cells = []
        for d, p in columns:
            mine = [v for k, v in checks.items() if k[:3] == (case, d, p)]
            if not mine:
                cells.append("not run")
            elif all(v["result"] == "ok" for v in mine):
                cells.append(next((v["ratio"] for k, v in checks.items() if k == (case, d, p, "triton")), "ok"))
            else:
                cells.append("FAIL")
        page.append(f"| {case} | " + " | ".join(cells) + " |")
    page += tiles_note(logs)
    for dtype in ("bf16", "fp16"):
        if any(r["dtype"] == dtype for r in rows):
            matmul = next(r["matmul"] for r in rows if r["dtype"] == dtype)
            page += ["", f"## Benchmark, {dtype} (matmul 8192^3 in the same run: {matmul:.0f} TFLOP/s)", "",
                     "H = 12, D = 64, w = 256, G global tokens (the first G of each row), no padding; median of 5 "
                     "CUDA-event timings after 3 warm-ups. TFLOP/s: useful FLOPs by the project's one count "
                     "(`longformer_kernels.flops`: the band and the global rows and columns, 4D FLOPs per pair and "
                     "head forward, forward+backward 3x) over the time. `skipped`: FlexAttention has no attention "
                     "dropout. Flex / ours, dense / ours: their time over ours (above 1: ours is faster). "
                     "FlexAttention here read the global tokens from a tensor in its mask, also at G = 0, which "
                     "made its forward slower than the band alone (lease 4, below): its column overstates "
                     "its cost. " + spread_note(rows), ""]
            page += bench_table(rows, dtype)
    page += later_leases(folder)
    for path in sorted(folder.glob("tune_round*.json")):
        page += ["", f"## Tile sweep ({path.stem.replace('_', ' ')}): device ms per call of each kernel", "",
                 "bf16, B = 8, N = 16,384, w = 256, D = 64, G = 8, no dropout; every kernel launched with the "
                 "row's tiles; median of 5 profiled calls (torch.profiler). Bold: the kernel's best.", ""]
        page += tune_table(path)
    return "\n".join(page) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
