"""One entry point for Longformer attention: pick an implementation by name.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D) -> (B, H, N, D). See ``pattern.py`` for semantics.
"""
from typing import Optional

import torch
from torch import Tensor

from .pattern import AttentionMasks, AttentionPattern
from .reference import reference_attention
from .sliding_chunks import sliding_chunks_attention

IMPLEMENTATIONS = ("auto", "reference", "torch", "triton")


def _triton_attention(*args, **kwargs):
    # Imported on first use: triton is heavy to import, and the kernels package is optional on
    # machines that only run the PyTorch path.
    from longformer_kernels import triton_longformer_attention

    return triton_longformer_attention(*args, **kwargs)


def resolve_implementation(impl: str, device: torch.device) -> str:
    """'auto' is Triton on CUDA and the vectorized PyTorch path elsewhere."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"attention implementation must be one of {IMPLEMENTATIONS}, got {impl!r}")
    if impl == "auto":
        return "triton" if device.type == "cuda" else "torch"
    return impl


def longformer_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_g: Optional[Tensor],
    k_g: Optional[Tensor],
    v_g: Optional[Tensor],
    pattern: AttentionPattern,
    masks: AttentionMasks = AttentionMasks(),
    impl: str = "auto",
    scale: Optional[float] = None,
    global_rows: bool = True,
) -> Tensor:
    """Longformer attention with the implementation ``impl`` (auto, reference, torch, triton).

    ``global_rows=False`` is for a caller that computes the global tokens' output rows itself
    (the self-attention module does, through the weights): those rows of the result are then
    unspecified. The PyTorch path skips them; the other implementations compute them anyway.
    """
    impl = resolve_implementation(impl, q.device)
    if impl == "torch":
        return sliding_chunks_attention(q, k, v, q_g, k_g, v_g, pattern, masks, scale=scale,
                                        global_rows=global_rows)
    fn = {"reference": reference_attention, "triton": _triton_attention}[impl]
    return fn(q, k, v, q_g, k_g, v_g, pattern, masks, scale=scale)
