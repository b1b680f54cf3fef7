"""Training threads that follow the free cores (``LONGFORMER_THREADS=auto``; docs/cpu.md).

fairseq trains with torch's thread count from start to end. Beside another busy process, one of
those threads shares a core and every parallel region waits for it: the step slows several times
over. Under the ``auto`` policy (``longformer_common.threads``) the count is set from the free
cores when training starts and re-checked every ``CHECK_EVERY`` updates from the CPU time the
machine spent since the last check (this process's own time not counted, so no sleep is needed),
never above the count torch had at the start; a change is logged in one line.
"""
import logging
from typing import Callable, Optional

import torch

from longformer_common import free_cores

logger = logging.getLogger(__name__)

CHECK_EVERY = 20  # updates between checks: a few seconds of the quickstart's training


class ThreadsFollowingFreeCores:
    """Sets torch's thread count to the free cores (at most ``most``): ``start()`` once, then
    ``after_update(num_updates)`` after every update."""

    def __init__(self, most: Optional[int] = None, every: int = CHECK_EVERY,
                 set_threads: Callable[[int], None] = torch.set_num_threads):
        self.most = most or torch.get_num_threads()
        self.every = every
        self.set_threads = set_threads
        self.threads = torch.get_num_threads()
        self.last: Optional[free_cores.CpuSample] = None

    def start(self) -> int:
        """Measure the free cores now (a short sleep) and set the count; returns it."""
        self._use(free_cores.free_cores())
        self.last = free_cores.sample()
        return self.threads

    def after_update(self, num_updates: int) -> None:
        """Every ``every`` updates: the free cores since the last check decide the count."""
        if num_updates % self.every:
            return
        now = free_cores.sample()
        free = free_cores.free_between(self.last, now, free_cores.allowed_cores())
        self.last = now
        self._use(free)

    def _use(self, free: int) -> None:
        count = max(1, min(self.most, free))
        if count != self.threads:
            logger.info(f"threads: {self.threads} -> {count} ({free} of the cores free of other processes' "
                        f"work; LONGFORMER_THREADS=auto, at most {self.most})")
            self.threads = count
        self.set_threads(count)


def following_free_cores(set_num_updates, follower: ThreadsFollowingFreeCores):
    """``Trainer.set_num_updates`` that also lets ``follower`` re-check the thread count."""
    def wrapped(self, num_updates):
        set_num_updates(self, num_updates)
        follower.after_update(num_updates)
    wrapped.__doc__ = set_num_updates.__doc__
    return wrapped
