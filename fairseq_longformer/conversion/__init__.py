"""Checkpoint conversion, cut by model family.

  families/          one adapter per family at the Hugging Face boundary: key tables, config
                     translation, checks (``longformer`` with ``longformer_checks`` and
                     ``longformer_heads``; ``led``)
  hf_export.py       fairseq checkpoint -> HF folder (longformer-export-hf), tokenizer.py its tokenizer
  hf_import.py       HF folder -> fairseq checkpoint (longformer-import-hf), read through hf_folder.py
  from_fairseq.py    fairseq -> fairseq: one driver, a spec per source (fairseq_sources.py)
  fairseq_checkpoint.py  reading and writing fairseq checkpoints; restore.py the fresh training state
  rules.py           what every conversion shares: windows, exact GELU, dictionary copy, positions

Names for code outside this package (the tools in ``longformer_tools``):

    extend_positions   a learned position table extended to more positions, tiled copies of the
                       learned rows (the paper's initialisation), fairseq's reserved rows kept
    to_hf_masked_lm    a built fairseq Longformer masked LM as an in-memory Hugging Face
                       LongformerForMaskedLM with the same weights (the export's key map and checks)
"""
from .hf_export import to_hf_masked_lm  # noqa: F401  (public)
from .rules import extend_positions  # noqa: F401  (public)
