"""fairseq's batch-buffer thread at interpreter exit (fairseq_longformer/runtime/exit_threads.py).

A run that ends while fairseq's ``BackgroundConsumer`` is inside a torch call aborted after its
work was done: "terminate called without an active exception", exit status 134. Each script
below ends exactly so: its consumer does torch work without pause, and the interpreter's
finalization lasts a second with the GIL released, so a consumer still alive then must take the
GIL back. The control, fairseq alone, shows that the script reproduces the abort; the plugin's
run must exit 0.
"""
import signal
import subprocess
import sys

import pytest

import fairseq_longformer  # noqa: F401  (applies the patches)
from fairseq.data import iterators

SCRIPT = r"""
import sys, threading, time
import torch
if sys.argv[1] == "plugin":
    import fairseq_longformer  # noqa: F401  (runtime.apply)
from fairseq.data import iterators

computing = threading.Event()
matrix = torch.randn(128, 128)


class SlowBatches:
    # batch 0 at once, then batches of 0.3 s of matrix products each (torch releases the GIL in each)
    def __len__(self):
        return 1000

    def __iter__(self):
        yield 0
        for n in range(1, 1000):
            computing.set()
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                matrix @ matrix
            yield n


class SlowFinalization:
    # deleted while the interpreter finalizes (after atexit): sleeps there with the GIL released
    def __del__(self, sleep=time.sleep):
        sleep(1.0)


batches = iterators.BufferedIterator(1000, SlowBatches())  # never full: the consumer never blocks
assert next(batches) == 0
assert computing.wait(120)
keep_finalizing = SlowFinalization()
print("work done", flush=True)
"""

ABORT = "terminate called without an active exception"


def run_script(mode):
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="from 3.14 Python parks a daemon thread at exit instead "
                    "of ending it with pthread_exit: the abort cannot happen")
def test_fairseq_alone_aborts_when_its_buffer_thread_is_busy_at_exit():
    result = run_script("fairseq")
    assert "work done" in result.stdout, result.stderr[-2000:]
    assert result.returncode == -signal.SIGABRT and ABORT in result.stderr, (result.returncode, result.stderr[-2000:])


def test_the_plugin_stops_the_buffer_thread_before_exit():
    result = run_script("plugin")
    assert result.returncode == 0 and ABORT not in result.stderr, (result.returncode, result.stderr[-2000:])
    assert "work done" in result.stdout


def test_buffered_batches_are_unchanged_by_the_patch():
    assert iterators.BackgroundConsumer.run._longformer_patched
    batches = iterators.BufferedIterator(3, list(range(10)))
    assert list(batches) == list(range(10))
