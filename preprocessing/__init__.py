"""Long-document corpus preprocessing for Longformer pretraining (installed as
``longformer_preprocessing``; console script ``longformer-preprocess``).

Readers (one module per source format) yield documents lazily; ``pipeline`` selects,
tokenizes (RoBERTa's GPT-2 BPE or sentencepiece) and writes fairseq mmap binaries ready for
``--sample-break-mode complete_doc``.
"""


def preprocess(argv=None):
    """Run the preprocessing with command-line style arguments; see ``pipeline.preprocess``."""
    from .pipeline import preprocess as _preprocess  # here: importing any submodule would load the whole pipeline

    return _preprocess(argv)


__all__ = ["preprocess"]
