"""A benchmark's results page: the markdown that ``--markdown PATH`` writes beside the JSON of
``longformer-bench``, ``longformer-bench-lm`` and ``longformer-bench-led``, built from that JSON
alone, so that ``--replot JSON`` re-renders the same bytes without measuring anything.

The page opens with the command that measures it again, reconstructed from the JSON's
``settings`` and the command's own parser (a flag is named only where its value differs from the
parser's default), and the command that re-renders it from the JSON. Ratios are the ones the
tools store, in their one convention: speedup = baseline time / this time (> 1: this is faster),
memory ratio = this peak / baseline peak (< 1: this needs less).
"""
import argparse
import os
import shlex
from typing import List, Optional, Sequence

from longformer_common.provenance import provenance_line
from longformer_common.quiet import load_banner
from longformer_common.staleness import CPU_MODEL_CODE, stale_banner
from . import busy_mode
from .ratios import limit_lines, row_order

# flags that say what to do with a run, not how it was measured: never part of the command
NOT_SETTINGS = ("replot", "markdown", "out_dir", "name", "help")


def _flag_value(action: argparse.Action, value) -> List[str]:
    """The words that give ``action`` the value ``value`` on a command line."""
    if isinstance(value, (list, tuple)):
        words = [f"{v:g}" if isinstance(v, float) else str(v) for v in value]
        # nargs="+" takes separate words; a list parsed from one word (--lengths 512,1024) takes one
        return words if action.nargs in ("+", "*") else [",".join(words)]
    return [f"{value:g}" if isinstance(value, float) else str(value)]


def command_line(prog: str, parser: argparse.ArgumentParser, settings: dict, json_path: str,
                 markdown_path: str) -> str:
    """The shell command that measures again what ``settings`` describe and writes ``json_path``
    and ``markdown_path``. A setting missing from an older JSON, or equal to the parser's
    default, is left out; a default worked out after parsing (None in the parser) is named."""
    words = [prog]
    for action in parser._actions:
        if action.dest in NOT_SETTINGS or not action.option_strings or action.dest not in settings:
            continue
        value = settings[action.dest]
        if value is None or value == action.default:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            words.append(action.option_strings[-1])
        else:
            words += [action.option_strings[-1]] + _flag_value(action, value)
    out_dir, file_name = os.path.split(json_path)
    words += ["--out-dir", out_dir or ".", "--name", os.path.splitext(file_name)[0], "--markdown", markdown_path]
    return " ".join(shlex.quote(w) for w in words)


def _number(value, spec: str = "{:,.0f}") -> str:
    return "-" if value is None else spec.format(value)


def _header(title: str, prog: str, parser, report: dict, json_path: str, markdown_path: str,
            notes: Sequence[str] = ()) -> List[str]:
    """Title, the banners of a run measured under load (``longformer_common.quiet``) or on code
    older than this checkout's (``longformer_common.staleness``), ``notes`` (more banners), the two
    commands, the machine and the ratios' convention."""
    env = report.get("environment", {})
    settings = report.get("settings", {})
    load = [env.get("load_average_at_start"), env.get("load_average_at_end")]
    load_text = ", ".join(f"{when} {value[0]:.1f}" for when, value in zip(("start", "end"), load) if value)
    machine = ", ".join(part for part in (
        f"torch {env['torch']}" if env.get("torch") else "",
        f"transformers {env['transformers']}" if env.get("transformers") else "",
        f"{env.get('cpus') or env.get('cpu_count')} cores" if env.get("cpus") or env.get("cpu_count") else "",
        (f"threads per worker: auto, {settings.get('threads_quiet')} quiet" if settings.get("threads") == "auto"
         else f"{settings['threads']} thread(s) per worker") if "threads" in settings else "",
        f"1-minute load average at {load_text}" if load_text else "",
        f"{env['seconds']:,.0f} s" if env.get("seconds") else "") if part)
    # a --busy run's own spin processes are in its end load: only the start says whether others' work shared it
    own_load = bool(settings.get("busy"))
    if own_load and load_text:
        load_text += f" (the end includes the run's own {settings['busy']} spin process(es))"
    banners = [load_banner(load[0], None if own_load else load[1]),
               stale_banner((report.get("provenance") or {}).get("commit"), CPU_MODEL_CODE), *notes]
    return [
        f"# {title}", "", *[line for banner in banners if banner for line in (banner, "")],
        "Written by this command (it measures again; minutes to hours on a CPU):", "",
        "```bash", command_line(prog, parser, settings, json_path, markdown_path), "```", "",
        "and re-rendered from the stored JSON, measuring nothing, by:", "",
        "```bash", " ".join(shlex.quote(w) for w in (prog, "--replot", json_path, "--markdown", markdown_path)),
        "```", "",
        f"Data: [{os.path.basename(json_path)}]({os.path.relpath(json_path, os.path.dirname(markdown_path) or '.')}) "
        "(every timed call, the settings, the environment). Machine: " + (machine or "not recorded") + ".", "",
        provenance_line(report.get("provenance")), "",
        f"Speedup = {report.get('speedup_definition', 'baseline time / this time (> 1: this is faster)')}; "
        f"memory ratio = {report.get('memory_ratio_definition', 'this peak / baseline peak (< 1: this uses less)')}. "
        "Times are medians of the timed calls in ms; peaks in MB, each measured in a fresh process."
        + (f" (This file's ratios: {report['ratios_note']}.)" if report.get("ratios_note") else ""), "",
    ]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _spread(values: Optional[Sequence[float]], spec: str, unit: str = "") -> str:
    """"median (min-max)" of the timed calls, or "-" without any."""
    if not values:
        return "-"
    text = lambda v: spec.format(v) + unit  # noqa: E731
    return f"{text(_median(values))} ({text(min(values))}-{text(max(values))})"


def _timed(row: dict) -> str:
    """fwd+bwd ms of a row: "median (min-max)" over its timed calls, the median alone with one."""
    calls = row.get("fwd_bwd_ms_all") or []
    return _spread(calls, "{:,.0f}") if len(calls) > 1 else _number(row["fwd_bwd_ms"])


def _limit(row: dict, limits: Sequence[dict]) -> str:
    """An older run's "fraction of the matmul limit" (the old definition: plain matmuls at the
    layer's shapes): "median (min-max)" over the rounds, else the stored one."""
    rounds = limit_fractions(row, limits) or []
    if len(rounds) > 1 and row.get("fraction_of_limit_fwd_bwd"):
        return _spread([100 * f for f in rounds], "{:.0f}", "%")
    return _number(row.get("fraction_of_limit_fwd_bwd"), "{:.0%}")


def _of_peak(row: dict) -> str:
    """The row's fraction of the matmul peak: "median (min-max)" over its timed calls."""
    calls = row.get("fraction_of_peak_fwd_bwd_all") or []
    if len(calls) > 1:
        return _spread([100 * f for f in calls], "{:.0f}", "%")
    return _number(row.get("fraction_of_peak_fwd_bwd"), "{:.0%}")


def limit_fractions(row: dict, limits: Sequence[dict]) -> Optional[List[float]]:
    """The row's fraction of an older run's matmul limit in each round of forward+backward calls:
    the limit worker's time for the same useful FLOPs over the row's time, round by round (the
    workers run round-robin, so call i of each is one round). None where the run stored no
    per-call times."""
    limit = next((m for m in limits if (m["length"], m["global_tokens"]) == (row["length"], row["global_tokens"])),
                 None)
    mine, theirs = row.get("fwd_bwd_ms_all"), (limit or {}).get("fwd_bwd_ms_all")
    if not mine or not theirs or len(mine) != len(theirs):
        return None
    return [limit_ms / ms for limit_ms, ms in zip(theirs, mine)]


def peak_line(peaks: dict) -> str:
    """"Matmul peak: 95.1 GFLOP/s float32 (n = 4,096), 180.2 bfloat16 (n = 2,048)." from the JSON's matmul_peak."""
    return "Matmul peak measured in the run: " + ", ".join(
        f"{p['gflops']:.1f} GFLOP/s {dtype} (n = {p['size']:,})" for dtype, p in peaks.items()) + "."


def _notes(rows: Sequence[dict]) -> List[str]:
    notes = [f"- {r['impl']} at N = {r['length']:,}" + (f", p = {r['dropout']:g}" if r.get("dropout") is not None else "")
             + f": {r['status']}: {r['note']}"
             for r in rows if r["status"] != "ok" and r.get("note")]
    return ["", "Not measured:", ""] + notes if notes else []


def figure1_page(report: dict, parser, json_path: str, markdown_path: str,
                 png_path: Optional[str] = None) -> str:
    """The page of ``longformer-bench``: the plot, then a table per global-token count."""
    s = report["settings"]
    peaks = report.get("matmul_peak")  # None: a run from before the peak (old "of limit" column)
    lines = _header(f"Self-attention speed and memory, {s['device']}, {s['dtype']}", "longformer-bench",
                    parser, report, json_path, markdown_path)
    lines += [f"B = {s['batch']}, {s['heads']} heads, head dim {s['head_dim']}, one-sided window w = {s['window']} "
              f"(Hugging Face attention_window {2 * s['window']}); from the hidden states through the q/k/v "
              "projections to the heads' output" + (" and the output projection" if s.get("output_projection") else "")
              + ". Contenders: dense = SDPA with the pattern as a boolean mask, torch / triton = this project's "
              "module, hf = transformers' LongformerSelfAttention; p = their attention-dropout rate (training "
              "mode), speedups against the baselines at the same p. fwd+bwd ms: median (min-max) of the "
              f"{s['repeats']} timed calls. Useful GFLOP/s: the layer's useful FLOPs (longformer_tools.flops) "
              "of a forward+backward over its median time; " + (
                  "of peak: that over the machine's matmul peak (large square products, same dtype and threads, "
                  "measured in the same run), median (min-max) over the timed calls." if peaks else
                  "of limit (old definition, not a ceiling): the time plain matmuls at the layer's shapes take "
                  "for the same work over the layer's, median (min-max) over the rounds; this run predates the "
                  "matmul peak, so the column can pass 100%."), ""]
    if peaks:
        lines += [peak_line(peaks), ""]
    if png_path:
        relative = os.path.relpath(png_path, os.path.dirname(markdown_path) or ".")
        lines += [f"![time and peak memory against sequence length]({relative})", ""]
    rows = report["results"]
    for global_tokens in sorted({r["global_tokens"] for r in rows}):
        lines += [f"## {global_tokens} global tokens", "",
                  "| N | contender | p | status | fwd ms | fwd+bwd ms | fwd MB | fwd+bwd MB | speedup vs hf | "
                  "speedup vs dense | memory vs hf | memory vs dense | useful GFLOP/s | "
                  + ("of peak |" if peaks else "of limit (old definition) |"),
                  "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        block = [r for r in rows if r["global_tokens"] == global_tokens]
        for row in sorted(block, key=row_order):
            ratios = row["ratios"]
            lines.append("| " + " | ".join([
                f"{row['length']:,}", row["impl"], _number(row.get("dropout"), "{:g}"), row["status"],
                _number(row["fwd_ms"]),
                _timed(row), _number(row["peak_fwd_mb"]), _number(row["peak_fwd_bwd_mb"]),
                _number(ratios.get("fwd_bwd_speedup_vs_hf"), "{:.2f}"),
                _number(ratios.get("fwd_bwd_speedup_vs_dense"), "{:.2f}"),
                _number(ratios.get("peak_fwd_bwd_mem_ratio_vs_hf"), "{:.2f}"),
                _number(ratios.get("peak_fwd_bwd_mem_ratio_vs_dense"), "{:.2f}"),
                _number(row.get("useful_gflops_fwd_bwd"), "{:.1f}"),
                _of_peak(row) if peaks else _limit(row, report.get("matmul_limits", []))]) + " |")
        limits = limit_lines(block)
        label = "Rate of plain matmuls at the layer's shapes (not a ceiling)" if peaks else "Matmul limit (old definition)"
        lines += [""] + ([f"{label} at {'; '.join(limits)}.", ""] if limits else [])
    lines += busy_mode.page_lines(report)
    lines += _notes(rows)
    return "\n".join(lines).rstrip("\n") + "\n"


TIMED_CALLS_NEEDED = 5


def few_calls_banner(report: dict) -> str:
    """A banner for a run that timed fewer than ``TIMED_CALLS_NEEDED`` calls per model, saying why
    from its own data (its slowest step and the run's length); "" otherwise."""
    repeats = report.get("settings", {}).get("repeats")
    if repeats is None or repeats >= TIMED_CALLS_NEEDED:
        return ""
    slowest = max((ms for row in report["results"] for ms in row.get("fwd_bwd_ms_all") or ()), default=None)
    seconds = report.get("environment", {}).get("seconds")
    why = ", ".join(part for part in (
        f"one step took up to {slowest / 1000:,.0f} s here" if slowest else "",
        f"the whole run {seconds:,.0f} s" if seconds else "") if part)
    return (f"> **{repeats} timed call(s) per model, fewer than the {TIMED_CALLS_NEEDED} a timing needs**: "
            f"{why or 'each step is long'}, too long to repeat {TIMED_CALLS_NEEDED} times at this size in a quiet "
            "window (scripts/regenerate_pages.sh re-measures only the pages it names, sized to fit); read its "
            "times as single measurements, its ratios as those of calls timed side by side.")


def model_page(report: dict, parser, prog: str, title: str, order: Sequence[str], json_path: str,
               markdown_path: str, step: str = "fwd+bwd") -> str:
    """The page of ``longformer-bench-lm`` / ``-led``: one model against one baseline per length,
    ``order`` = (model, baseline); ``step`` names the timed forward+backward call."""
    model, baseline = order[0], order[-1]
    lines = _header(title, prog, parser, report, json_path, markdown_path, [few_calls_banner(report)])
    checks = report.get("loss_checks")
    if checks:
        theirs = lambda c: c.get("dense_loss", c.get("transformers_loss"))  # noqa: E731
        lines += ["Before timing, both models' losses on the same inputs (eval mode): " + "; ".join(
            f"N = {int(n):,}: {c['longformer_loss']:.6f} against {theirs(c):.6f} nats "
            f"(|difference| {abs(c['longformer_loss'] - theirs(c)):.1e})" for n, c in checks.items()) + ".", ""]
    check = report.get("check")
    if check:
        lines += [f"Before timing, both encoders at N = {check['length']} (inside the window): largest "
                  f"|{model} - {baseline}| = {check['max_abs_diff']:.1e}.", ""]
    lines += [f"{step} ms: median (min-max) of the {report['settings'].get('repeats', '?')} timed calls; the "
              "ratios from the medians.", "",
              f"| N | {'encoder' if prog.endswith('led') else 'model'} | status | {step} ms | fwd ms | {step} MB | "
              f"fwd MB | speedup ({baseline} / {model} time) | memory ratio ({model} / {baseline} peak) | "
              "fwd speedup | fwd memory ratio |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in sorted(report["results"], key=lambda r: (r["length"], order.index(r["impl"]))):
        r = row["ratios"]
        lines.append("| " + " | ".join([
            f"{row['length']:,}", row["impl"], row["status"],
            _timed(row), _number(row["fwd_ms"]),
            _number(row["peak_fwd_bwd_mb"]), _number(row["peak_fwd_mb"]),
            _number(r.get("fwd_bwd_speedup"), "{:.2f}"), _number(r.get("fwd_bwd_mem_ratio"), "{:.2f}"),
            _number(r.get("fwd_speedup"), "{:.2f}"), _number(r.get("fwd_mem_ratio"), "{:.2f}")]) + " |")
    lines += _notes(report["results"])
    return "\n".join(lines).rstrip("\n") + "\n"


def write_page(text: str, markdown_path: str) -> None:
    """Write the page, creating its folder."""
    os.makedirs(os.path.dirname(markdown_path) or ".", exist_ok=True)
    with open(markdown_path, "w") as handle:
        handle.write(text)
