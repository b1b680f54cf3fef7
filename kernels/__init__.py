"""Triton kernels of fairseq-longformer, installed as ``longformer_kernels``.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D) -> (B, H, N, D); semantics in
``fairseq_longformer/attention/pattern.py``. Importing this package imports triton; on a
machine without CUDA set TRITON_INTERPRET=1 first (Triton's CPU interpreter).
"""
from .longformer_attention import (
    LongformerAttentionFunction, block_config, triton_longformer_attention,
)

__all__ = ["LongformerAttentionFunction", "block_config", "triton_longformer_attention"]
