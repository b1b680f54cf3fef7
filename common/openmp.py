"""OpenMP's wait policy for this project's processes, set before torch loads its OpenMP runtime.

torch 2.13's CPU wheel links GNU libgomp (``ldd libtorch_cpu.so``: libgomp.so.1). When a parallel
region ends, libgomp's idle threads spin for GOMP_SPINCOUNT iterations (300,000 by default, about
a millisecond) before they sleep. On a machine whose cores are all in use, a spinning thread
takes the core from the thread the region is waiting for, so a process of many short parallel
regions (the band path's per-chunk ops) slows many times over beside one busy process.
OMP_WAIT_POLICY=PASSIVE (never spin) removes that but also slows a quiet machine, where the
spin is what makes back-to-back regions cheap. The middle: spin briefly, then sleep.

``apply_defaults`` puts these values into the environment where the user has not set them
(a user's own OMP_WAIT_POLICY / GOMP_SPINCOUNT / KMP_BLOCKTIME always wins). libgomp reads its
environment once, when it is loaded, so this must run before ``import torch``: the package
``longformer_tools``, ``fairseq_longformer`` and the console scripts call it first thing, and the
recipes export the same values (recipes/env_flags.sh) for fairseq-train, which imports torch
before it loads the plugin. Child processes (benchmark workers) inherit the environment.
"""
import os
from typing import Dict, MutableMapping, Optional

# libgomp: spin this many iterations (tens of microseconds) before sleeping, instead of 300,000
USER_CHOICES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")  # KMP_: the LLVM/Intel runtime's
DEFAULTS: Dict[str, str] = {"GOMP_SPINCOUNT": "10000"}


def apply_defaults(environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, str]:
    """Set ``DEFAULTS`` in ``environ`` (default os.environ) unless the user chose a wait policy
    (any of ``USER_CHOICES`` already set); return what was set ({} when nothing was)."""
    environ = os.environ if environ is None else environ
    if any(name in environ for name in USER_CHOICES):
        return {}
    environ.update(DEFAULTS)
    return dict(DEFAULTS)
