"""The results of the benchmarks as ratios against the baselines measured in the same run, and
their printed tables: ``add_ratios`` and ``format_table`` for ``longformer-bench``;
``model_vs_baseline_rows`` and ``format_model_rows`` for ``longformer-bench-lm`` and
``longformer-bench-led``. One convention everywhere: speedup = baseline time / this time (> 1:
this is faster), memory ratio = this peak / baseline peak (< 1: this needs less).
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
    memory) against each of ``bases`` measured in the same run at the same attention-dropout
    rate, and the output agreement with every other row of the length and global-token count
    (at any rate: outputs are compared in eval mode)."""
    rows = [r.to_json() for r in results]
    by_key = {(r["impl"], r["length"], r["global_tokens"], r.get("dropout")): r for r in rows}
    for row in rows:
        point = (row["length"], row["global_tokens"])
        key = (*point, row.get("dropout"))
        fingerprints = [other["fingerprint"] for other in rows
                        if (other["length"], other["global_tokens"]) == point and other["fingerprint"]
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


def fmt(value, spec="{:.0f}", none="-") -> str:
    return none if value is None else spec.format(value)


def row_order(row: dict):
    """Rows of ``longformer-bench`` in print order: by length, dropout rate, contender."""
    return row["length"], row.get("dropout") or 0.0, CONTENDERS.index(row["impl"])


def limit_lines(rows: List[dict]) -> List[str]:
    """One line per length: the rate of plain matmuls at the layer's shapes of the rows' point
    (``matmul_limit``), if measured; an older run's rows call it limit_gflops."""
    lines = []
    for length in sorted({r["length"] for r in rows}):
        for prefix in ("shape_rate_gflops", "limit_gflops"):
            rate = next((r for r in rows if r["length"] == length and r.get(f"{prefix}_fwd_bwd")), None)
            if rate is not None:
                lines.append(f"N={length}: {fmt(rate[f'{prefix}_fwd'], '{:.1f}')} GFLOP/s forward, "
                             f"{fmt(rate[f'{prefix}_fwd_bwd'], '{:.1f}')} forward+backward")
                break
    return lines


def format_table(rows: List[dict]) -> str:
    """One block per global-token count: a line per (length, dropout rate, contender), then the
    rate of plain matmuls at the layer's shapes of each length."""
    header = (f"{'N':>6} {'impl':>6} {'p':>4} {'status':>8} {'fwd ms':>9} {'fwd+bwd ms':>11} {'fwd MB':>8} "
              f"{'f+b MB':>8} {'xHF f+b':>8} {'xDense f+b':>10} {'mem/HF':>7} {'mem/dense':>9} {'|diff|':>8} "
              f"{'busy':>5} {'GFLOP/s':>8} {'peak':>6}")
    lines = []
    for global_tokens in sorted({r["global_tokens"] for r in rows}):
        block = [r for r in rows if r["global_tokens"] == global_tokens]
        lines.append(f"\nglobal tokens: {global_tokens}   (p: attention-dropout rate; xHF, xDense: speedup = "
                     "their time / this time at the same p; mem/HF, mem/dense: this peak / their peak, "
                     "forward+backward; |diff|: largest output difference to the other contenders (eval mode); "
                     "busy: cores used by other work just before timing; GFLOP/s: useful FLOPs per second, "
                     "forward+backward; peak: that as a fraction of the machine's matmul peak measured in the run)")
        lines.append(header)
        lines.append("-" * len(header))
        for row in sorted(block, key=row_order):
            ratios = row["ratios"]
            status = row["status"] if row["status"] != "too_slow" else "slow"
            lines.append(
                f"{row['length']:>6} {row['impl']:>6} {fmt(row.get('dropout'), '{:g}'):>4} {status:>8} "
                f"{fmt(row['fwd_ms']):>9} "
                f"{fmt(row['fwd_bwd_ms']):>11} {fmt(row['peak_fwd_mb']):>8} {fmt(row['peak_fwd_bwd_mb']):>8} "
                f"{fmt(ratios['fwd_bwd_speedup_vs_hf'], '{:.2f}'):>8} "
                f"{fmt(ratios['fwd_bwd_speedup_vs_dense'], '{:.2f}'):>10} "
                f"{fmt(ratios['peak_fwd_bwd_mem_ratio_vs_hf'], '{:.2f}'):>7} "
                f"{fmt(ratios['peak_fwd_bwd_mem_ratio_vs_dense'], '{:.2f}'):>9} "
                f"{fmt(row['max_abs_diff_vs_others'], '{:.0e}'):>8} "
                f"{fmt(row['busy_cores_before'], '{:.1f}'):>5} "
                f"{fmt(row.get('useful_gflops_fwd_bwd'), '{:.1f}'):>8} "
                f"{fmt(row.get('fraction_of_peak_fwd_bwd'), '{:.0%}'):>6}")
        lines += [f"rate of plain matmuls at the layer's shapes at {line}" for line in limit_lines(block)]
    notes = sorted({f"{r['impl']} N={r['length']} G={r['global_tokens']}"
                    + (f" p={r['dropout']:g}" if r.get("dropout") is not None else "") + f": {r['status']}: {r['note']}"
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
            f"{row['length']:>6} {row['impl']:>10} {row['status']:>7} {fmt(row['fwd_bwd_ms']):>11} "
            f"{fmt(row['fwd_ms']):>9} {fmt(row['peak_fwd_bwd_mb']):>11} {fmt(row['peak_fwd_mb']):>8} "
            f"{fmt(r.get('fwd_bwd_speedup'), '{:.2f}'):>8} {fmt(r.get('fwd_bwd_mem_ratio'), '{:.2f}'):>6} "
            f"{fmt(r.get('fwd_speedup'), '{:.2f}'):>11} {fmt(r.get('fwd_mem_ratio'), '{:.2f}'):>7} "
            f"{fmt(row['busy_cores_before'], '{:.1f}'):>5}")
    notes = [f"{r['impl']} N={r['length']}: {r['status']}: {r['note']}" for r in rows if r["status"] != "ok"]
    return "\n".join(lines + notes)
