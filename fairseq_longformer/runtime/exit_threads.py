"""fairseq's batch-buffer threads, stopped and joined before the interpreter exits.

The failure: fairseq's epoch iterators keep ``--data-buffer-size`` batches ready (10 by default)
in a queue filled by a daemon thread, ``iterators.BackgroundConsumer``. A run that stops inside
an epoch (``--max-update``, ``--stop-time-hours``, a fine-tuning's last update) leaves that thread
alive at exit, usually blocked on the full queue. When it is instead inside a torch call that
released the GIL (unpickling a DataLoader worker's batch, or collating one with
``--num-workers 0``) while the interpreter finalizes, Python (before 3.14) ends the thread with
``pthread_exit`` as it takes the GIL back; that unwinding crosses a C++ frame that may not
throw (pybind11's GIL guard) and the C++ runtime aborts the process:
``terminate called without an active exception``, exit status 134, after the run's log and
checkpoints were written. Seen once in scripts/wheel_check.sh's 2 updates (a machine busy enough
that the queue was still filling at exit); every time when batches are slow to collate
(tests/plugin/test_exit_threads.py).

The fix: each consumer reads its batches through ``_until_exit``, which ends the source at the
first batch after the process starts exiting, so fairseq's own ``run`` returns; an ``atexit``
handler (which runs before the interpreter finalizes) sets that flag, empties the queue of each
live consumer (one blocked on a full queue wakes up) and joins it, for at most
``JOIN_SECONDS``. The handler is registered after multiprocessing's, so it runs first (atexit is
last-in, first-out), while the DataLoader workers a consumer may be waiting on still run.
"""
import atexit
import logging
import multiprocessing.util  # noqa: F401  (registers multiprocessing's exit handler before ours)
import queue
import threading
import time

from fairseq.data import iterators

logger = logging.getLogger(__name__)

JOIN_SECONDS = 10.0  # a consumer finishes the batch it is collating or waiting for, then returns
_exiting = threading.Event()


def _until_exit(source):
    """The batches of ``source`` until the process starts exiting."""
    for batch in source:
        if _exiting.is_set():
            return
        yield batch


def _emptied(buffer: queue.Queue) -> None:
    """Take every batch out of ``buffer`` (the process is exiting: nobody will read them)."""
    while True:
        try:
            buffer.get_nowait()
        except queue.Empty:
            return


def stop_buffer_threads(timeout: float = JOIN_SECONDS) -> None:
    """Stop and join every live ``BackgroundConsumer`` (the atexit handler; also callable)."""
    _exiting.set()
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if not isinstance(thread, iterators.BackgroundConsumer):
            continue
        while thread.is_alive() and time.monotonic() < deadline:
            _emptied(thread._queue)
            thread.join(0.05)
        if thread.is_alive():
            logger.warning(f"fairseq's batch-buffer thread still runs {timeout:.0f} s after the run ended; exiting "
                           "anyway (the process may abort at exit: fairseq_longformer/runtime/exit_threads.py)")


def buffer_threads_stopped_before_exit() -> None:
    """``BackgroundConsumer.run`` reads its source through ``_until_exit``; ``stop_buffer_threads``
    runs at exit. Idempotent."""
    run = iterators.BackgroundConsumer.run
    if getattr(run, "_longformer_patched", False):
        return

    def run_until_exit(self):
        self._source = _until_exit(self._source)
        run(self)

    run_until_exit.__doc__ = run.__doc__
    run_until_exit._longformer_patched = True
    iterators.BackgroundConsumer.run = run_until_exit
    atexit.register(stop_buffer_threads)
