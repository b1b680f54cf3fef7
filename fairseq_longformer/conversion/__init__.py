"""Checkpoint conversion: families/ (one Hugging Face adapter per family), hf_export / hf_import
(fairseq <-> HF folders), fairseq_sources (RoBERTa -> Longformer, BART -> LED). Public names:
    extend_positions    a position table tiled to more positions
    to_hf_masked_lm     a masked-LM checkpoint as a transformers model
"""
from .hf_export import to_hf_masked_lm  # noqa: F401  (public)
from .rules import extend_positions  # noqa: F401  (public)
