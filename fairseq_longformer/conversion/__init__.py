"""Checkpoint conversion, cut by model family.

  families/          one adapter per family at the Hugging Face boundary: its key map, config
                     translation and checks (``longformer`` + ``longformer_checks`` +
                     ``longformer_heads``; ``led``)
  hf_export.py       fairseq checkpoint -> HF folder, for either family (longformer-export-hf)
  hf_import.py       HF folder -> fairseq checkpoint, for either family (longformer-import-hf),
                     reading the folder through hf_folder.py (sizes checked against the tensors)
  tokenizer.py       the tokenizer files an export writes (GPT-2 BPE or sentencepiece)
  from_fairseq.py    fairseq -> fairseq: one driver, a spec per source (fairseq_sources.py:
                     RoBERTa -> Longformer, BART -> LED)
  fairseq_checkpoint.py  reading a fairseq checkpoint (the one unpickling function) and writing
                     a converted folder; restore.py: the fresh training state and its flags
  rules.py           the rules every conversion shares: window sides, exact GELU, the
                     dictionary copy, position tiling, shape checks

Names for code outside this package (the tools in ``longformer_tools``):

    extend_positions   a learned position table extended to more positions, tiled copies of the
                       learned rows (the paper's initialisation), fairseq's reserved rows kept
    to_hf_masked_lm    a built fairseq Longformer masked LM as an in-memory Hugging Face
                       LongformerForMaskedLM with the same weights (the export's key map and checks)
"""
from .hf_export import to_hf_masked_lm  # noqa: F401  (public)
from .rules import extend_positions  # noqa: F401  (public)
