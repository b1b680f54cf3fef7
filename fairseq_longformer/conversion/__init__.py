"""Checkpoint conversion (RoBERTa -> Longformer, BART -> LED, fairseq <-> Hugging Face).

Names for code outside this package (the tools in ``longformer_tools``):

    extend_positions   a learned position table extended to more positions, tiled copies of the
                       learned rows (the paper's initialisation), fairseq's reserved rows kept
"""
from .positions import extend_positions  # noqa: F401  (public)
