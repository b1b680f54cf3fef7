"""``matmul_limit``: the rate of plain matmuls at the layer's shapes (once called the limit) is the
harmonic combination of the shapes' rates weighted by the FLOPs they stand for, and a row's
fraction of it follows from its time; the table's last column is the fraction of the matmul peak
(``matmul_peak``); on known numbers."""
import pytest

from longformer_tools import flops
from longformer_tools.bench import matmul_limit, matmul_peak, ratios
from longformer_tools.bench.contenders import Case
from longformer_tools.bench.measure import Result

SIZES = Case(impl="dense", length=0, global_tokens=0, heads=2, head_dim=16, window=8, threads=1)


def test_limit_time_weights_each_shape_by_the_flops_it_stands_for():
    runner = matmul_limit.MatmulRunner(matmul_limit.limit_case(SIZES, 64, 3))
    assert runner.timed("fwd") > 0 and runner.timed("fwd_bwd") > 0  # real matmuls
    seconds = {index: 1e-3 * (index + 1) for index in range(len(runner.shapes))}
    runner._seconds = seconds.get  # known times: shape i takes (i + 1) ms
    for call, weight in (("fwd", lambda s: s.forward_weight),
                         ("fwd_bwd", lambda s: s.forward_weight + s.backward_weight)):
        expected = sum(weight(s) / (s.flops / seconds[i]) for i, s in enumerate(runner.shapes)) * 1e3
        assert runner.timed(call) == pytest.approx(expected)
    # the limit row turns the limit times into GFLOP/s of the layer's useful FLOPs
    counted = flops.layer_flops(1, 64, 2, 16, 8, 3)
    result = Result(runner.case, fwd_ms=2.0, fwd_bwd_ms=4.0)
    row = matmul_limit.limit_row(result)
    assert row["shape_rate_gflops_fwd"] == pytest.approx(counted.forward / 2e6)
    assert row["shape_rate_gflops_fwd_bwd"] == pytest.approx(counted.forward_backward / 4e6)


def test_rows_get_useful_gflops_and_their_fraction_of_the_limit():
    results = [Result(Case(impl="torch", length=64, global_tokens=3, dropout=0.1), fwd_ms=5.0, fwd_bwd_ms=10.0),
               Result(Case(impl="dense", length=64, global_tokens=3, dropout=0.1), status="oom")]
    limits = [{"length": 64, "global_tokens": 3, "shape_rate_gflops_fwd": 2.0, "shape_rate_gflops_fwd_bwd": 4.0}]
    rows = matmul_limit.add_efficiency(ratios.add_ratios(results), limits, SIZES)
    counted = flops.layer_flops(1, 64, 2, 16, 8, 3)
    torch_row, dense_row = rows
    assert torch_row["useful_flops_fwd_bwd"] == counted.forward_backward == 3 * torch_row["useful_flops_fwd"]
    assert torch_row["useful_gflops_fwd_bwd"] == pytest.approx(counted.forward_backward / 10e6)
    assert torch_row["fraction_of_shape_rate_fwd_bwd"] == pytest.approx(counted.forward_backward / 10e6 / 4.0)
    assert torch_row["fraction_of_shape_rate_fwd"] == pytest.approx(counted.forward / 5e6 / 2.0)
    assert dense_row["useful_gflops_fwd_bwd"] is None and dense_row["fraction_of_shape_rate_fwd_bwd"] is None
    table = ratios.format_table(matmul_peak.add_fractions(rows, peak_gflops=8.0))
    line = next(line for line in table.splitlines() if line.split()[:2] == ["64", "torch"])
    assert line.split()[-2:] == [f"{counted.forward_backward / 10e6:.1f}",
                                 f"{counted.forward_backward / 10e6 / 8.0:.0%}"]
    assert "rate of plain matmuls at the layer's shapes at N=64: 2.0 GFLOP/s forward, 4.0 forward+backward" in table
