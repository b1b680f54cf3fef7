"""Checkpoint conversion: families/ (one Hugging Face adapter per family), hf_export / hf_import
(fairseq <-> HF folders), from_fairseq (RoBERTa -> Longformer, BART -> LED). Public:
``extend_positions`` (a position table tiled to more positions) and ``to_hf_masked_lm``."""
from .hf_export import to_hf_masked_lm  # noqa: F401  (public)
from .rules import extend_positions  # noqa: F401  (public)
