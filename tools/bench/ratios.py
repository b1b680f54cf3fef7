"""The results of the benchmarks: ratios against the baselines measured in the same run
(``add_ratios`` for ``longformer-bench``; ``model_vs_baseline_rows`` and ``format_model_rows`` for
``longformer-bench-lm`` and ``longformer-bench-led``), the printed tables and the plot. One
convention everywhere: speedup = baseline time / this time (> 1: this is faster), memory ratio =
this peak / baseline peak (< 1: this needs less). matplotlib is an optional dependency
(``pip install fairseq-longformer[bench]``), imported only when the plot is drawn.
"""
from typing import List, Optional, Sequence

from .contenders import CONTENDERS
from .measure import Result

SPEEDUP_DEFINITION = "baseline time / this time (> 1: this is faster)"
MEMORY_RATIO_DEFINITION = "this peak / baseline peak (< 1: this uses less)"


def _ratio(numerator, denominator) -> Optional[float]:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def add_ratios(results: List[Result], bases: Sequence[str] = ("hf", "dense")) -> List[dict]:
    """JSON rows with speedups (baseline time / time) and memory ratios (memory / baseline
    memory) against each of ``bases`` measured in the same run, and the output agreement."""
    rows = [r.to_json() for r in results]
    by_key = {(r["impl"], r["length"], r["global_tokens"]): r for r in rows}
    for row in rows:
        key = (row["length"], row["global_tokens"])
        fingerprints = [other["fingerprint"] for other in rows
                        if (other["length"], other["global_tokens"]) == key and other["fingerprint"]
                        and other is not row]
        row["max_abs_diff_vs_others"] = (
            max(max(abs(a - b) for a, b in zip(row["fingerprint"], other)) for other in fingerprints)
            if row["fingerprint"] and fingerprints else None)
        row["ratios"] = {}
        ok = row["status"] == "ok"
        for base in bases:
            other = by_key.get((base, *key))
            base_ok = other is not None and other["status"] == "ok"
            row["ratios"][f"fwd_speedup_vs_{base}"] = _ratio(other["fwd_ms"], row["fwd_ms"]) if ok and base_ok else None
            row["ratios"][f"fwd_bwd_speedup_vs_{base}"] = (
                _ratio(other["fwd_bwd_ms"], row["fwd_bwd_ms"]) if ok and base_ok else None)
            has_memory = other is not None and other["peak_fwd_bwd_mb"] is not None and row["peak_fwd_bwd_mb"] is not None
            row["ratios"][f"peak_fwd_bwd_mem_ratio_vs_{base}"] = (
                _ratio(row["peak_fwd_bwd_mb"], other["peak_fwd_bwd_mb"]) if has_memory else None)
            row["ratios"][f"peak_fwd_mem_ratio_vs_{base}"] = (
                _ratio(row["peak_fwd_mb"], other["peak_fwd_mb"]) if has_memory else None)
    return rows


def _fmt(value, spec="{:.0f}", none="-") -> str:
    return none if value is None else spec.format(value)


def format_table(rows: List[dict]) -> str:
    """One block per global-token count: a line per (length, contender)."""
    header = (f"{'N':>6} {'impl':>6} {'status':>8} {'fwd ms':>9} {'fwd+bwd ms':>11} {'fwd MB':>8} "
              f"{'f+b MB':>8} {'xHF f+b':>8} {'xDense f+b':>10} {'mem/HF':>7} {'mem/dense':>9} {'|diff|':>8} {'busy':>5}")
    lines = []
    for global_tokens in sorted({r["global_tokens"] for r in rows}):
        lines.append(f"\nglobal tokens: {global_tokens}   (xHF, xDense: speedup = their time / this time; "
                     "mem/HF, mem/dense: this peak / their peak, forward+backward; |diff|: largest output "
                     "difference to the other contenders; busy: cores used by other work just before timing)")
        lines.append(header)
        lines.append("-" * len(header))
        for row in sorted((r for r in rows if r["global_tokens"] == global_tokens),
                          key=lambda r: (r["length"], CONTENDERS.index(r["impl"]))):
            ratios = row["ratios"]
            status = row["status"] if row["status"] != "too_slow" else "slow"
            lines.append(
                f"{row['length']:>6} {row['impl']:>6} {status:>8} {_fmt(row['fwd_ms']):>9} "
                f"{_fmt(row['fwd_bwd_ms']):>11} {_fmt(row['peak_fwd_mb']):>8} {_fmt(row['peak_fwd_bwd_mb']):>8} "
                f"{_fmt(ratios['fwd_bwd_speedup_vs_hf'], '{:.2f}'):>8} "
                f"{_fmt(ratios['fwd_bwd_speedup_vs_dense'], '{:.2f}'):>10} "
                f"{_fmt(ratios['peak_fwd_bwd_mem_ratio_vs_hf'], '{:.2f}'):>7} "
                f"{_fmt(ratios['peak_fwd_bwd_mem_ratio_vs_dense'], '{:.2f}'):>9} "
                f"{_fmt(row['max_abs_diff_vs_others'], '{:.0e}'):>8} "
                f"{_fmt(row['busy_cores_before'], '{:.1f}'):>5}")
    notes = sorted({f"{r['impl']} N={r['length']} G={r['global_tokens']}: {r['status']}: {r['note']}"
                    for r in rows if r["status"] not in ("ok",)})
    if notes:
        lines.append("\n" + "\n".join(notes))
    return "\n".join(lines)


def model_vs_baseline_rows(results: List[Result], model: str, baseline: str = "dense") -> List[dict]:
    """JSON rows of ``results`` (one model against one baseline, a pair per length): the
    ``model``'s row gets "ratios" against the ``baseline``'s row at its length, every other row {}:
    fwd_bwd_speedup, fwd_speedup = baseline time / model time (> 1: the model is faster);
    fwd_bwd_mem_ratio, fwd_mem_ratio = model peak / baseline peak (< 1: the model needs less)."""
    rows = add_ratios(results, bases=(baseline,))
    for row in rows:
        ratios = row.pop("ratios")
        row["ratios"] = {} if row["impl"] != model else {
            "fwd_bwd_speedup": ratios[f"fwd_bwd_speedup_vs_{baseline}"],
            "fwd_speedup": ratios[f"fwd_speedup_vs_{baseline}"],
            "fwd_bwd_mem_ratio": ratios[f"peak_fwd_bwd_mem_ratio_vs_{baseline}"],
            "fwd_mem_ratio": ratios[f"peak_fwd_mem_ratio_vs_{baseline}"],
        }
    return rows


def format_model_rows(rows: List[dict], order: Sequence[str], impl_heading: str = "model",
                      fwd_bwd: str = "fwd+bwd", preface: str = "") -> str:
    """The table of ``model_vs_baseline_rows``: a line per (length, impl), impls in ``order``
    (the model first, the baseline last), then a note per row that is not ok. ``fwd_bwd`` names
    the forward+backward call in the headings; ``preface`` starts the explanatory first line."""
    model, baseline = order[0], order[-1]
    header = (f"{'N':>6} {impl_heading:>10} {'status':>7} {fwd_bwd + ' ms':>11} {'fwd ms':>9} "
              f"{fwd_bwd + ' MB':>11} {'fwd MB':>8} {'speedup':>8} {'mem':>6} {'fwd speedup':>11} "
              f"{'fwd mem':>7} {'busy':>5}")
    lines = [f"{preface}speedup = {baseline} time / {model} time (> 1: {model} faster); mem = {model} "
             f"peak / {baseline} peak (< 1: {model} needs less); busy: cores used by other work just "
             "before timing", header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: (r["length"], order.index(r["impl"]))):
        r = row["ratios"]
        lines.append(
            f"{row['length']:>6} {row['impl']:>10} {row['status']:>7} {_fmt(row['fwd_bwd_ms']):>11} "
            f"{_fmt(row['fwd_ms']):>9} {_fmt(row['peak_fwd_bwd_mb']):>11} {_fmt(row['peak_fwd_mb']):>8} "
            f"{_fmt(r.get('fwd_bwd_speedup'), '{:.2f}'):>8} {_fmt(r.get('fwd_bwd_mem_ratio'), '{:.2f}'):>6} "
            f"{_fmt(r.get('fwd_speedup'), '{:.2f}'):>11} {_fmt(r.get('fwd_mem_ratio'), '{:.2f}'):>7} "
            f"{_fmt(row['busy_cores_before'], '{:.1f}'):>5}")
    notes = [f"{r['impl']} N={r['length']}: {r['status']}: {r['note']}" for r in rows if r["status"] != "ok"]
    return "\n".join(lines + notes)


def _matplotlib():
    """(matplotlib, matplotlib.pyplot) with the file-only Agg backend, or an ImportError that says
    how to install the optional dependency."""
    import logging

    for name in ("matplotlib", "PIL"):  # a DEBUG root logger would print their font search
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError("drawing the benchmark's plot needs matplotlib, an optional dependency: "
                          "pip install 'fairseq-longformer[bench]'") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401  (matplotlib.ticker.* below)

    return matplotlib, plt


def require_matplotlib() -> None:
    """Raise the ImportError of ``_matplotlib`` now, before a long measurement, not after it."""
    _matplotlib()


COLORS = {"dense": "tab:red", "torch": "tab:blue", "triton": "tab:green", "hf": "tab:orange"}
LABELS = {"dense": "full attention (SDPA, dense mask)", "torch": "ours, PyTorch",
          "triton": "ours, Triton", "hf": "Hugging Face Longformer"}


def plot(rows: List[dict], path: str, title: str) -> None:
    """Draw ``figure1(rows, title)`` into the PNG file ``path``."""
    _, plt = _matplotlib()
    figure = figure1(rows, title)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def figure1(rows: List[dict], title: str):
    """The paper's Figure 1 as a matplotlib figure: two log-log panels, time and peak memory
    against N, forward+backward (solid: no global tokens; dashed: with global tokens; one line
    per contender and global-token count, labelled "<contender label>, <G> global") and forward
    only (thin dotted)."""
    matplotlib, plt = _matplotlib()

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(13, 5))
    global_counts = sorted({r["global_tokens"] for r in rows})
    styles = ["-", "--", "-.", ":"]
    for impl in CONTENDERS:
        for index, global_tokens in enumerate(global_counts):
            series = sorted((r for r in rows if r["impl"] == impl and r["global_tokens"] == global_tokens
                             and r["status"] in ("ok", "too_slow")), key=lambda r: r["length"])
            if not series:
                continue
            style = styles[index % len(styles)]
            label = f"{LABELS[impl]}, {global_tokens} global"
            lengths = [r["length"] for r in series]
            for axis, key, fwd_key in ((time_axis, "fwd_bwd_ms", "fwd_ms"),
                                       (memory_axis, "peak_fwd_bwd_mb", "peak_fwd_mb")):
                values = [r[key] for r in series]
                points = [(n, v) for n, v in zip(lengths, values) if v is not None]
                if points:
                    axis.plot(*zip(*points), style, marker="o", color=COLORS[impl], label=label)
                fwd = [(n, r[fwd_key]) for n, r in zip(lengths, series) if r[fwd_key] is not None]
                if fwd and index == 0:
                    axis.plot(*zip(*fwd), ":", linewidth=1, color=COLORS[impl], alpha=0.6)
            for r in series:
                if r["status"] == "too_slow" and r["fwd_bwd_ms"] is not None:
                    time_axis.plot(r["length"], r["fwd_bwd_ms"], "x", color=COLORS[impl], markersize=10)
            failed = [r for r in rows if r["impl"] == impl and r["global_tokens"] == global_tokens
                      and r["status"] == "oom"]
            for r in failed:
                memory_axis.annotate("OOM", (r["length"], max(v["peak_fwd_bwd_mb"] or 1 for v in series)),
                                     color=COLORS[impl], fontsize=8)
    lengths = sorted({r["length"] for r in rows})
    for axis, ylabel in ((time_axis, "time per call (ms)"), (memory_axis, "peak memory (MB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(lengths, [str(n) for n in lengths])
        axis.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xlabel("sequence length N")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
    time_axis.set_title("time per call, forward+backward")
    memory_axis.set_title("peak memory, forward+backward")
    for axis in (time_axis, memory_axis):
        axis.text(0.99, 0.01, "thin dotted: forward only, no global tokens", transform=axis.transAxes,
                  ha="right", va="bottom", fontsize=7, color="0.3")
    time_axis.legend(fontsize=7, loc="upper left")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure
