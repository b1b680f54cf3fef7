"""One entry point for Longformer attention: pick an implementation by name.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D) -> (B, H, N, D). See ``pattern.py`` for semantics.
"""
from typing import Optional

import torch
from torch import Tensor

from .dropout import AttentionDropout
from .pattern import AttentionMasks, AttentionPattern
from .reference import reference_attention
from .sliding_chunks import sliding_chunks_attention

IMPLEMENTATIONS = ("auto", "reference", "torch", "triton")


def resolve_implementation(impl: str, device: torch.device) -> str:
    """'auto' is Triton on CUDA and the vectorized PyTorch path elsewhere."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"attention implementation must be one of {IMPLEMENTATIONS}, got {impl!r}")
    if impl == "auto":
        return "triton" if device.type == "cuda" else "torch"
    return impl


def longformer_attention(q: Tensor, k: Tensor, v: Tensor,
                         q_g: Optional[Tensor], k_g: Optional[Tensor], v_g: Optional[Tensor],
                         pattern: AttentionPattern, masks: AttentionMasks = AttentionMasks(),
                         impl: str = "auto", scale: Optional[float] = None, global_rows: bool = True,
                         dropout: Optional[AttentionDropout] = None,
                         band_bias: Optional[Tensor] = None) -> Tensor:
    """Longformer attention with the implementation ``impl`` (auto, reference, torch, triton).

    ``global_rows=False`` is for a caller that computes the global tokens' output rows itself
    (the self-attention module does, through the weights): q_g, k_g, v_g may then be None and
    those rows of the result are unspecified. The PyTorch path and the Triton kernel skip them;
    the reference computes them from q, k, v when q_g is None. ``dropout``: ``dropout.py``.
    ``band_bias``: (B, H, N, W) additive scores of the window keys (W = w + 1 causal, 2w + 1
    two-sided; "Band bias" in ``pattern.py``), differentiable, or None.
    """
    if torch.is_autocast_enabled(q.device.type):
        # Under autocast each op would cast for itself and meet the cores' own dtype handling
        # (fp32 scores, in-place merges of the global keys: "Input dtypes must be the same" from
        # baddbmm_): run the core with autocast off on its inputs in autocast's dtype, as a model
        # cast to that dtype (fairseq's --bf16) runs it.
        dtype = torch.get_autocast_dtype(q.device.type)
        q, k, v, q_g, k_g, v_g, band_bias = (None if t is None else t.to(dtype)
                                              for t in (q, k, v, q_g, k_g, v_g, band_bias))
        with torch.autocast(q.device.type, enabled=False):
            return longformer_attention(q, k, v, q_g, k_g, v_g, pattern, masks, impl, scale, global_rows, dropout,
                                        band_bias)
    impl = resolve_implementation(impl, q.device)
    if impl == "reference":
        if not global_rows and q_g is None:  # those rows are unspecified: any stand-in will do
            q_g, k_g, v_g = q, k, v
        return reference_attention(q, k, v, q_g, k_g, v_g, pattern, masks, scale=scale, dropout=dropout,
                                   band_bias=band_bias)
    if impl == "torch":
        fn = sliding_chunks_attention
    else:
        # imported on first use: triton is heavy to import and absent on some machines
        from .triton_attention import triton_longformer_attention as fn
    return fn(q, k, v, q_g, k_g, v_g, pattern, masks, scale=scale, global_rows=global_rows, dropout=dropout,
              band_bias=band_bias)
