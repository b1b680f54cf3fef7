"""The GPU page's ratios and verdicts are computed from the lease logs, not written as text: the
same renderer on a log with other times gives other ratios (an independent check: the ratios
recomputed here from the log's times)."""
import shutil
from pathlib import Path

import pytest

from longformer_tools.report import gpu_results, lease_ratios

LEASES = Path(__file__).resolve().parents[3] / "docs" / "results" / "gpu_h200"


def _ab():
    return lease_ratios.ab_rows(gpu_results.log_block(LEASES / "lease4.log", "=== ab (", "=== ab:"))


def test_ab_rows_compute_old_over_new_from_the_times():
    rows = _ab()
    assert len(rows) == 14
    for row in rows:
        assert row["speedup"] == pytest.approx(row["old_ms"] / row["new_ms"])
    first = rows[0]
    assert (first["batch"], first["length"], first["globals"], first["passes"]) == (8, 16384, 0, "fwd")
    assert (first["old_ms"], first["new_ms"]) == (1.355, 1.256)


def test_the_summary_ranges_cover_every_row_of_their_group():
    rows = _ab()
    big_fwd = [r["old_ms"] / r["new_ms"] for r in rows if r["passes"] == "fwd" and (r["batch"], r["length"]) == (8, 16384)]
    text = lease_ratios.ab_summary(rows)
    assert f"{min(big_fwd):.2f}-{max(big_fwd):.2f}x as fast at B = 8, N = 16,384" in text
    # the row where the new forward was slower (dropout 0.1, 8 global tokens) is inside the range
    assert min(big_fwd) < 1


def test_ratio_range_and_verdict():
    assert lease_ratios.ratio_range([1.04, 1.08, 1.06]) == "1.04-1.08x"
    assert lease_ratios.ratio_range([1.051]) == "1.05x" and lease_ratios.ratio_range([]) == "-"
    assert lease_ratios.verdict(0.99) == "on par" and lease_ratios.verdict(1.2) == "faster"
    assert lease_ratios.verdict(0.8) == "slower"


def test_the_flex_verdict_follows_the_logged_times(tmp_path):
    log = tmp_path / "lease4.log"
    shutil.copy(LEASES / "lease4.log", log)
    ours = next(r for r in _ab() if (r["batch"], r["length"], r["globals"], r["dropout"], r["passes"])
                == (8, 16384, 0, 0.0, "fwd+bwd"))
    band = lease_ratios.flex_times(log)[(0, lease_ratios.FLEX_BAND)]
    expected = lease_ratios.verdict(band["fwd_bwd"] / ours["old_ms"])
    assert lease_ratios.flex_verdict(log, _ab()) == expected
    assert f"Flex / ours {band['fwd_bwd'] / ours['old_ms']:.2f}" in lease_ratios.flex_summary(log, _ab())
    # the same log with Flex's band-only forward+backward twice as long: the verdict changes
    text = log.read_text()
    line = next(line for line in text.splitlines() if line.startswith("G=0 band only"))
    slower = line.replace(f"{band['fwd_bwd']:.3f}", f"{2 * band['fwd_bwd']:.3f}")
    log.write_text(text.replace(line, slower))
    assert lease_ratios.flex_verdict(log, _ab()) == "faster"
    tensor = lease_ratios.flex_times(log)[(0, lease_ratios.FLEX_MASK_TENSOR)]
    assert f"{tensor['fwd'] / band['fwd']:.1f}x slower" in lease_ratios.flex_summary(log, _ab())
