"""The core dropout A/B runs end to end on a small shape and reports what it timed."""
import re

from longformer_tools.bench import core_dropout


def test_core_dropout_prints_times_and_ratio(capsys):
    assert core_dropout.main(["--length", "96", "--window", "4", "--heads", "2", "--head-dim", "16",
                              "--rounds", "3", "--threads", "1", "--quiet-below", "99"]) == 0
    out = capsys.readouterr().out
    assert "N=96" in out and "3 alternating rounds" in out
    faults = re.findall(r"ms  \(median\), +([\d,]+) page faults per call", out)
    assert len(faults) == 2 and all(int(f.replace(",", "")) >= 0 for f in faults)
    low, high = map(float, re.search(r"range ([\d.]+) \.\. ([\d.]+)", out).groups())
    median = float(re.search(r"median ([\d.]+),", out).group(1))
    assert 0 < low <= median <= high


def test_core_dropout_refuses_a_rate_outside_0_1(capsys):
    try:
        core_dropout.main(["--rate", "1.5"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("accepted --rate 1.5")
    assert "--rate in (0, 1)" in capsys.readouterr().err
