"""Evaluation metrics of the fine-tuning tasks, in plain Python (no fairseq, no torch): the
plugin's criteria score with them during validation, and light command-line tools (such as
``longformer-coref-score``) score files with them where torch is not installed.

    answers         answer normalisation (SQuAD v1.1's, TriviaQA's), exact match and word F1
    hotpotqa        HotpotQA's official answer, supporting-fact and joint scores
    coref           coreference: MUC, B-cubed, CEAF-m/e and the CoNLL score (the official scorer's)
    assignment      the optimal one-to-one alignment CEAF needs (the Hungarian algorithm)
    classification  macro-averaged F1 over classes
"""
