"""Root pytest configuration.

TRITON_INTERPRET is read when ``@triton.jit`` decorates a kernel, so it must be set before
``longformer_kernels`` is imported: on a machine without CUDA the Triton kernels then run in
Triton's CPU interpreter.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Fixtures shared across the test folders (small data sets, a stock BART and its LED, a
# reference training run), made once per session whichever folder asks first.
pytest_plugins = ["tests.support.finetune_data", "tests.support.led_models", "tests.support.training",
                  "tests.support.device"]  # --device cuda: the suite on a GPU
