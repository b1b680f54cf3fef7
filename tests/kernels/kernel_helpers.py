"""The input setup the Triton kernel tests share (test_triton_attention.py, test_triton_band_bias.py):
a test case, its masks, its seeded random inputs, and a forward + backward that returns the output
and every gradient.

Shapes: q, k, v, q_g, k_g, v_g, dO: (B, H, N, D); padding / global masks: (B, N); band_bias:
(B, H, N, W), W = w + 1 (causal) or 2w + 1 (two-sided).

Imports only torch and ``longformer_kernels.pattern`` (no Triton), so importing it first does
not choose Triton's interpreter before the root conftest.py sets TRITON_INTERPRET.
"""
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import torch

from longformer_kernels.pattern import AttentionMasks

from tests.conftest import ACCELERATOR  # noqa: E402  (the ``accelerator`` fixture's, imports no Triton)

DEVICE = ACCELERATOR.device.type  # where forward_backward runs the function under test
HEAD_DIM = 16  # the interpreter is slow: small heads unless a test asks for a GPU's
FLOOR = {torch.float32: 2e-6, torch.float16: 2e-4,  # absolute floor of the "2x plain PyTorch" rule
         torch.bfloat16: 2e-3}  # 8x fp16's: bf16 keeps 3 fewer significand bits


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    heads: int
    length: int
    window: int
    dilation: Tuple[int, ...] = (1,)
    causal: bool = False
    valid_lengths: Optional[Sequence[int]] = None  # per batch row; positions beyond are padding
    global_positions: Optional[Sequence[Sequence[int]]] = None  # per batch row, may hit padding
    scale: Optional[float] = None  # None: default_scale(head_dim)
    head_dim: int = HEAD_DIM
    max_global_tokens: Optional[int] = None  # AttentionMasks' static bound of the global count


def case_masks(case: Case) -> AttentionMasks:
    """padding (B, N) from valid_lengths, is_global (B, N) from global_positions; None where the
    case has none."""
    padding = is_global = None
    if case.valid_lengths is not None:
        positions = torch.arange(case.length)
        padding = torch.stack([positions >= n for n in case.valid_lengths])
    if case.global_positions is not None:
        is_global = torch.zeros(case.batch, case.length, dtype=torch.bool)
        for row, chosen in enumerate(case.global_positions):
            is_global[row, list(chosen)] = True
    return AttentionMasks(padding=padding, is_global=is_global, max_global_tokens=case.max_global_tokens)


def device_masks(masks: AttentionMasks) -> AttentionMasks:
    """The same masks on DEVICE."""
    return AttentionMasks(
        padding=None if masks.padding is None else masks.padding.to(DEVICE),
        is_global=None if masks.is_global is None else masks.is_global.to(DEVICE),
        max_global_tokens=masks.max_global_tokens)


def random_inputs(case: Case, dtype: torch.dtype, seed: int = 0,
                  bias_used: Optional[torch.Tensor] = None):
    """[q, k, v, q_g, k_g, v_g] (the last three None without global tokens), then, when
    ``bias_used`` ((B, H, N, W) bool) is given, a band bias ~ 2 N(0, 1) holding NaN where
    ``bias_used`` is False; and dO. All on the CPU in ``dtype``, drawn in that order from one
    generator seeded with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    shape = (case.batch, case.heads, case.length, case.head_dim)
    tensors = [torch.randn(shape, generator=generator) for _ in range(6)]
    if case.global_positions is None:
        tensors[3:] = [None, None, None]
    if bias_used is not None:
        bias = torch.randn(bias_used.shape, generator=generator) * 2
        tensors.append(bias.masked_fill(~bias_used, float("nan")))
    grad_out = torch.randn(shape, generator=generator)
    cast = lambda t: None if t is None else t.to(dtype)  # noqa: E731
    return [cast(t) for t in tensors], cast(grad_out)


def forward_backward(fn, inputs, grad_out):
    """[out, then the gradient of each input (None for a None input)], on the CPU: ``fn`` run on
    copies of ``inputs`` moved to DEVICE, backward from ``grad_out``."""
    leaves = [None if t is None else t.detach().to(DEVICE).requires_grad_() for t in inputs]
    out = fn(*leaves)
    present = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, present, grad_out.to(DEVICE)))
    return [out.detach().cpu()] + [None if t is None else next(grads).cpu() for t in leaves]
