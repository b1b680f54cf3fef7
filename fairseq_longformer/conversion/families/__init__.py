"""One adapter per model family at the Hugging Face boundary (key map, config translation,
checks): ``longformer`` (+ ``longformer_checks``, ``longformer_heads``) and ``led``."""
