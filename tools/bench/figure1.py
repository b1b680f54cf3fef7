"""The paper's Figure 1 as a PNG: time and peak memory of each contender of ``longformer-bench``
against the sequence length, from the rows of ``ratios.add_ratios``. matplotlib is an optional
dependency (``pip install fairseq-longformer[bench]``), imported only when a figure is drawn.
"""
from typing import List

from .contenders import CONTENDERS


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
    only (thin dotted). With several attention-dropout rates, the rows of the lowest are drawn
    (the table and the JSON hold them all)."""
    matplotlib, plt = _matplotlib()
    rates = sorted({r.get("dropout") or 0.0 for r in rows})
    if len(rates) > 1:
        rows = [r for r in rows if (r.get("dropout") or 0.0) == rates[0]]
        title += f"; attention dropout p = {rates[0]:g}"

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
