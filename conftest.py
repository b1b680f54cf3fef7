"""Root pytest configuration.

TRITON_INTERPRET is read when ``@triton.jit`` decorates a kernel, so it must be set before
``longformer_kernels`` is imported: on a machine without CUDA the Triton kernels then run in
Triton's CPU interpreter.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
