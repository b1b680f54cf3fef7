"""The suite on a GPU: ``pytest --device cuda`` (``bash scripts/test.sh --device cuda``).

With ``--device cuda`` only the tests marked ``device`` are selected: they build their models,
train and generate on the device given (``DEVICE``; fairseq commands without ``--cpu``, see
``cpu_flag``). Every other test is deselected, and the run's summary says how many of each
folder and why (``DESELECTED_WHY``): they test CPU behaviour (the Triton interpreter, gloo, CPU
compatibility patches, float64 references), data preparation, or tools whose CUDA mode
scripts/gpu_round.sh runs. Without the option (``--device cpu``, the default) nothing changes:
the device tests run on the CPU, tiny, where they mean something there, and skip with the
reason where they do not. Under pytest-xdist each worker collects and deselects; the controller
prints the first worker's summary (``pytest_testnodedown``).

Registered for the whole suite by the root conftest.py (``pytest_plugins``).
"""
import collections
import os

import pytest

ENV = "LONGFORMER_TEST_DEVICE"  # set from --device before any test module is imported
DEVICE = os.environ.get(ENV, "cpu")
DESELECTED_WHY = {
    "tests/kernels": "the Triton interpreter on CPU tensors; on a GPU the kernels are checked by "
                     "longformer_tools.gpu.gpu_check (scripts/gpu_round.sh, stage checks)",
    "tests/preprocessing": "data preparation: no device code",
    "tests/tools": "benchmark and report tools on CPU; their CUDA mode runs in scripts/gpu_round.sh (stage throughput)",
    "tests/recipes": "recipe scripts and dry runs: no device code",
    "tests/experiments": "small experiments whose committed results are CPU runs",
    "tests/plugin": "CPU numerics (float64 references, exact comparisons); the device tests build the same "
                    "models on the GPU",
    "tests/integration": "CPU-only behaviour (gloo ranks, CPU compatibility patches, bad input, wheel, timing)",
}


def device() -> str:
    """"cpu" or "cuda": where the device tests run (``--device``)."""
    return os.environ.get(ENV, DEVICE)


def cpu_flag() -> list:
    """fairseq's ``--cpu`` when the device tests run on the CPU, else nothing (fairseq then uses CUDA)."""
    return ["--cpu"] if device() == "cpu" else []


def fp32_or_bf16_flag() -> list:
    """A short training run's device and precision: ``--cpu`` (fp32) on the CPU, ``--bf16`` on CUDA."""
    return ["--cpu"] if device() == "cpu" else ["--bf16"]


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=("cpu", "cuda"),
                     help="cuda: run only the tests marked 'device', on the GPU (the rest deselected, with the "
                          "reason in the summary); default cpu")


def pytest_configure(config):
    config.addinivalue_line("markers", "device: trains or runs models on --device (selected by --device cuda)")
    chosen = config.getoption("device")
    os.environ[ENV] = chosen
    global DEVICE
    DEVICE = chosen
    if chosen == "cuda" and not config.option.collectonly:
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError("--device cuda: torch.cuda.is_available() is False here; run without --device")


def _folder(item) -> str:
    parts = item.nodeid.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def pytest_collection_modifyitems(config, items):
    if config.getoption("device") == "cpu":
        return
    keep = [item for item in items if item.get_closest_marker("device")]
    dropped = [item for item in items if not item.get_closest_marker("device")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
    counts = collections.Counter(_folder(item) for item in dropped)
    config.stash[_SUMMARY] = dict(counts)
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the controller prints it
        config.workeroutput["device_deselected"] = dict(counts)


_SUMMARY = pytest.StashKey[dict]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist, on the controller: keep the first worker's deselection counts."""
    counts = getattr(node, "workeroutput", {}).get("device_deselected")
    if counts is not None and _SUMMARY not in node.config.stash:
        node.config.stash[_SUMMARY] = counts


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = config.stash.get(_SUMMARY, None)
    if counts is None:
        return
    device_name = config.getoption("device")
    terminalreporter.section(f"deselected by --device {device_name}")
    for folder, count in sorted(counts.items()):
        why = DESELECTED_WHY.get(folder, "not marked 'device': runs on the CPU only")
        terminalreporter.write_line(f"{count:5d} in {folder}: {why}")
    terminalreporter.write_line(f"{sum(counts.values()):5d} deselected in all; the tests marked 'device' ran on "
                                f"{device_name}")
