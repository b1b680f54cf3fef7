"""The ratios and verdicts of the GPU page, computed from what the leases printed (their logs under
``docs/results/gpu_h200/``), never written as text: the old-against-new kernel rounds of lease 4
(``=== ab`` block) and its FlexAttention variants (``G=... fwd ... ms fwd+bwd ... ms`` lines).

Ratios are old time / new time (> 1: the new kernels are faster) and Flex time / ours (> 1: ours
is faster); two times within ``PAR`` of each other are "on par".
"""
import re
from pathlib import Path
from typing import Dict, List, Sequence

PAR = 0.05  # relative difference below which two medians count as on par (the leases' run-to-run noise)
AB_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(fwd\+bwd|fwd)\s+([\d.]+)\s+([\d.]+)")
FLEX_LINE = re.compile(r"^G=(\d+) (.+?)\s+fwd\s+([\d.]+) ms\s+fwd\+bwd\s+([\d.]+) ms")
FLEX_BAND = "band only"
FLEX_MASK_TENSOR = "band | is_global[j] | is_global[i]"


def ab_rows(lines: Sequence[str]) -> List[dict]:
    """The rows of lease 4's old-against-new block: batch, length, globals, dropout, passes, old and
    new ms, and ``speedup`` = old / new computed here (the log's own ratio column is not read)."""
    rows = []
    for line in lines:
        match = AB_LINE.match(line)
        if match:
            b, n, g, p, passes, old, new = match.groups()
            rows.append(dict(batch=int(b), length=int(n), globals=int(g), dropout=float(p), passes=passes,
                             old_ms=float(old), new_ms=float(new), speedup=float(old) / float(new)))
    return rows


def flex_times(log: Path) -> Dict[tuple, dict]:
    """(globals, mask form) -> {"fwd", "fwd_bwd"} ms from lease 4's FlexAttention lines."""
    found = {}
    for line in log.read_text().splitlines():
        match = FLEX_LINE.match(line.strip())
        if match:
            g, form, fwd, fwd_bwd = match.groups()
            found[(int(g), form.strip())] = dict(fwd=float(fwd), fwd_bwd=float(fwd_bwd))
    return found


def ratio_range(values: Sequence[float]) -> str:
    """"1.04-1.08x", or "1.05x" for one value (or equal ones), "-" for none."""
    if not values:
        return "-"
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low}x" if low == high else f"{low}-{high}x"


def verdict(ratio: float) -> str:
    """"on par" within PAR, else which side is faster (ratio = their time / ours)."""
    if abs(ratio - 1) <= PAR:
        return "on par"
    return "faster" if ratio > 1 else "slower"


def ab_summary(rows: Sequence[dict]) -> str:
    """What the old-against-new rounds show, each range computed over its rows."""
    big = lambda r: r["batch"] == 8 and r["length"] == 16384  # noqa: E731
    def speedups(passes, keep):
        return [r["speedup"] for r in rows if r["passes"] == passes and keep(r)]
    parts = []
    for passes, name in (("fwd", "The forward"), ("fwd+bwd", "forward+backward")):
        large, small = speedups(passes, big), speedups(passes, lambda r: not big(r))
        parts.append(f"{name} ran {ratio_range(large)} as fast at B = 8, N = 16,384 (G = 0 and 8, dropout 0 "
                     f"and 0.1; {sum(s > 1 for s in large)} of {len(large)} rows faster) and "
                     f"{ratio_range(small)} at smaller B or N (old time / new time, over the old-against-new rounds)")
    return "; ".join(parts) + "."


def flex_summary(log: Path, ab: Sequence[dict]) -> str:
    """The FlexAttention verdict at G = 0, B = 8, N = 16,384: its mask read from a tensor against
    the band alone, and the band alone against ours (new forward, old forward+backward: the
    committed backward is the old one)."""
    flex = flex_times(log)
    band, tensor = flex.get((0, FLEX_BAND)), flex.get((0, FLEX_MASK_TENSOR))
    ours = {r["passes"]: r for r in ab if (r["batch"], r["length"], r["globals"], r["dropout"]) == (8, 16384, 0, 0.0)}
    if not band or not tensor or set(ours) != {"fwd", "fwd+bwd"}:
        return "The log holds no complete FlexAttention comparison at G = 0."
    ours_fwd, ours_fwd_bwd = ours["fwd"]["new_ms"], ours["fwd+bwd"]["old_ms"]
    ratio = band["fwd_bwd"] / ours_fwd_bwd
    return (f"Reading `is_global[i] | is_global[j]` in the mask made Flex's forward "
            f"{tensor['fwd'] / band['fwd']:.1f}x slower than the band alone ({tensor['fwd']:.2f} against "
            f"{band['fwd']:.2f} ms), even with no token global; every Flex time in the benchmark tables of the GPU page was taken "
            "that way and overstates its cost. Written as the band alone, Flex takes "
            f"{band['fwd']:.2f} ms forward and {band['fwd_bwd']:.2f} ms forward+backward at G = 0, against ours "
            f"{ours_fwd:.2f} ms (new forward) and {ours_fwd_bwd:.2f} ms (old kernels, whose backward is the one "
            f"committed): Flex / ours {ratio:.2f} forward+backward, {flex_verdict(log, ab)} (within "
            f"{PAR:.0%} counts as on par).")


def flex_verdict(log: Path, ab: Sequence[dict]) -> str:
    """"on par", "faster" or "slower": ours against Flex written as the band alone, forward+backward
    at G = 0, B = 8, N = 16,384; "not measured" without both times."""
    band = flex_times(log).get((0, FLEX_BAND))
    ours = [r for r in ab if (r["batch"], r["length"], r["globals"], r["dropout"], r["passes"])
            == (8, 16384, 0, 0.0, "fwd+bwd")]
    return verdict(band["fwd_bwd"] / ours[0]["old_ms"]) if band and ours else "not measured"
