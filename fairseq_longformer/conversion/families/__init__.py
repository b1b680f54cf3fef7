"""One adapter per model family at the Hugging Face boundary: ``longformer`` (with its task heads) and ``led``."""
