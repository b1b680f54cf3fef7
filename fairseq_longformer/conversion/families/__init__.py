"""One adapter per model family at the Hugging Face boundary: ``longformer`` (+ ``longformer_heads``) and ``led``."""
