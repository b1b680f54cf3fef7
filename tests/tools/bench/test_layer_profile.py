"""The layer-profile page: what it measures and writes on a tiny layer, how it groups the
profiler's operators and counts the products' FLOPs, and its refusals. Never how fast."""
import json

import pytest

from longformer_tools.bench import layer_profile

TINY = ["--length", "128", "--heads", "2", "--head-dim", "16", "--window", "16", "--calls", "5",
        "--peak-sizes", "64", "--allow-load"]


def test_product_flops_from_profiler_shapes():
    assert layer_profile.product_flops("aten::mm", [[4, 8], [8, 3]]) == 2 * 4 * 8 * 3
    assert layer_profile.product_flops("aten::bmm", [[5, 4, 8], [5, 8, 3]]) == 2 * 5 * 4 * 8 * 3
    assert layer_profile.product_flops("aten::addmm", [[3], [4, 8], [8, 3], [], []]) == 2 * 4 * 8 * 3
    assert layer_profile.product_flops("aten::baddbmm_", [[5, 4, 3], [5, 4, 8], [5, 8, 3], [], []]) == 2 * 5 * 4 * 8 * 3
    assert layer_profile.product_flops("aten::mm", [[4, 8]]) == 0  # shapes not recorded: nothing counted


def test_summary_groups_and_gap():
    run = {"timed_s": [1.0, 1.1, 0.9, 1.0, 1.2], "profiled_s": [1.0, 1.0],
           "operators": {"aten::mm": {"self_s": 1.2, "flops": 120e9, "count": 4},
                         "aten::add_": {"self_s": 0.3, "flops": 0, "count": 10},
                         "aten::weird": {"self_s": 0.1, "flops": 0, "count": 1}},
           "useful_flops_fwd_bwd": 50e9, "peak_gflops": 200.0, "peak_at_start_gflops": 200.0,
           "peak_at_end_gflops": 190.0}
    numbers = layer_profile.summary(run)
    assert numbers["fraction_median"] == pytest.approx(50e9 / 1.0 / 1e9 / 200)
    assert numbers["shares"]["matrix products"] == pytest.approx(0.6)
    assert numbers["shares"]["elementwise sums and scaling"] == pytest.approx(0.15)
    assert numbers["shares"]["other operators"] == pytest.approx(0.05)
    assert numbers["shares"]["outside operators"] == pytest.approx(0.2)
    assert sum(numbers["shares"].values()) == pytest.approx(1.0)
    assert numbers["matmul_rate_gflops"] == pytest.approx(100.0)
    assert numbers["matmul_flops_per_useful"] == pytest.approx(60e9 / 50e9)
    assert numbers["fraction_if_only_matmuls"] == pytest.approx(100e9 / 1.2 / 1e9 / 200)
    text = layer_profile.page({"settings": {"length": 4096, "heads": 12, "head_dim": 64, "window": 256,
                                            "dropout": 0.1, "threads": 2, "calls": 5},
                               "run": run, "provenance": None, "load_average_at_start": [0.5, 0.5, 0.5],
                               "load_average_at_end": [0.6, 0.5, 0.5]}, "r.json", "r.md")
    assert "50 points short of the 75% target" in text
    assert "| `aten::mm` | matrix products | 2 | 60.0% |" in text


def _peak(gflops):
    return lambda *args, **kwargs: {"dtype": "float32", "gflops": gflops, "size": 64, "gflops_all": {}}


def test_tiny_run_writes_json_and_page_the_replot_renders_again(tmp_path, monkeypatch):
    # a peak no tiny layer reaches: the page's content, not this machine's speed, is under test
    monkeypatch.setattr(layer_profile.matmul_peak, "measure", _peak(1e6))
    out_json, out_md = tmp_path / "p.json", tmp_path / "p.md"
    assert layer_profile.main([*TINY, "--json", str(out_json), "--markdown", str(out_md)]) == 0
    report = json.loads(out_json.read_text())
    assert len(report["run"]["timed_s"]) == 5 and len(report["run"]["profiled_s"]) == 5
    assert report["run"]["operators"]["aten::mm"]["flops"] > 0  # shapes recorded, products counted
    assert sum(layer_profile.summary(report["run"])["shares"].values()) == pytest.approx(1.0)
    page = out_md.read_text()
    out_md.unlink()
    assert layer_profile.main(["--replot", str(out_json), "--markdown", str(out_md)]) == 0
    assert out_md.read_text() == page


def test_a_fraction_above_the_peak_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(layer_profile.matmul_peak, "measure", _peak(1e-6))  # a peak measured far too low
    assert layer_profile.main([*TINY, "--json", str(tmp_path / "p.json"), "--markdown", str(tmp_path / "p.md")]) == 3
    assert "measurement bug" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_fewer_than_five_calls_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        layer_profile.main(["--calls", "3", "--json", str(tmp_path / "p.json")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--calls 3" in err and "--calls 5 or more" in err
    assert not list(tmp_path.iterdir())
