"""The core dropout A/B runs end to end on a small shape and reports what it timed."""
import re

import pytest

from longformer_kernels import fused_dropout_mask
from longformer_tools.bench import core_dropout


def test_core_dropout_prints_times_and_ratio(capsys):
    assert core_dropout.main(["--length", "96", "--window", "4", "--heads", "2", "--head-dim", "16",
                              "--rounds", "3", "--threads", "1", "--quiet-below", "99"]) == 0
    out = capsys.readouterr().out
    assert "N=96" in out and "3 rounds of the contenders" in out
    assert "eager mask" in out and "fused mask" in out  # numba is in the test environment
    faults = re.findall(r"ms  \(median\), +([\d,]+) page faults per call", out)
    assert len(faults) == 3 and all(int(f.replace(",", "")) >= 0 for f in faults)
    ratios = re.findall(r"median ([\d.]+), range ([\d.]+) \.\. ([\d.]+)", out)
    assert len(ratios) == 2
    for median, low, high in ratios:
        assert 0 < float(low) <= float(median) <= float(high)
    assert fused_dropout_mask()  # switched back on


def test_core_dropout_refuses_a_rate_outside_0_1(capsys):
    try:
        core_dropout.main(["--rate", "1.5"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("accepted --rate 1.5")
    assert "--rate in (0, 1)" in capsys.readouterr().err


def test_core_dropout_page_is_rendered_again_from_its_json(tmp_path, capsys):
    """--json stores every round; --replot renders the same page from it alone (results_pages
    relies on that for docs/results/core_dropout.md)."""
    data, page = tmp_path / "core.json", tmp_path / "core.md"
    assert core_dropout.main(["--length", "64", "--window", "4", "--heads", "2", "--head-dim", "8", "--rounds", "5",
                              "--threads", "1", "--quiet-below", "99", "--json", str(data),
                              "--markdown", str(page)]) == 0
    written = page.read_text()
    rows = [line for line in written.splitlines() if line.startswith("| dropout 0.1")]
    assert len(rows) == 2 and "Measured on commit " in written
    page.unlink()
    assert core_dropout.main(["--replot", str(data), "--markdown", str(page)]) == 0
    assert page.read_text() == written
    with pytest.raises(SystemExit):
        core_dropout.main(["--markdown", str(page)])  # a page needs its data
    assert "--markdown needs --json" in capsys.readouterr().err
