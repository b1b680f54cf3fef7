"""Longformer attention in pure PyTorch (no fairseq import): the pattern, the reference and the
vectorized path, behind one entry point."""
from .api import IMPLEMENTATIONS, longformer_attention, resolve_implementation
from .pattern import AttentionMasks, AttentionPattern, parse_dilation, parse_per_layer
from .reference import reference_attention
from .sliding_chunks import sliding_chunks_attention

__all__ = [
    "AttentionMasks", "AttentionPattern", "IMPLEMENTATIONS", "longformer_attention",
    "parse_dilation", "parse_per_layer", "reference_attention", "resolve_implementation",
    "sliding_chunks_attention",
]
