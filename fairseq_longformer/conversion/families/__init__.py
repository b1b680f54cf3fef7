"""One adapter per model family at the Hugging Face boundary: its declarative key map, its config
translation (fairseq <-> HF) and its checks. ``longformer`` (the encoder with its masked-LM,
classification and QA heads; checks in ``longformer_checks``, heads in ``longformer_heads``) and
``led`` (the encoder-decoder). The char-LM has no HF counterpart and no adapter."""
