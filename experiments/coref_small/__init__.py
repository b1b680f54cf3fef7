"""The paper's coreference ordering in small (issue 43, item 5): whole-document encoding against
512-subword segments on KJV documents whose antecedent distance is controlled (``documents``);
``python -m longformer_experiments.coref_small`` trains both, a few seeds each, and writes
docs/results/coref_small.md."""
