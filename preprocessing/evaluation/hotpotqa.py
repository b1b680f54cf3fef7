"""HotpotQA's official metrics (``hotpot_evaluate_v1.py`` of the hotpotqa/hotpot repository), per
example; the corpus score is their mean over examples.

- Answer: exact match of the normalized texts (SQuAD v1.1's normalization: lower case, punctuation
  removed, articles removed, whitespace collapsed); F1 over the normalized words, except that when
  either normalized text is "yes", "no" or "noanswer" and the two differ, precision, recall and F1
  are all 0 (a yes/no answer is all or nothing).
- Supporting facts: precision and recall of the predicted (title, sentence index) set against the
  gold set (0 when the denominator is 0), F1 from them, exact match when the sets are equal.
- Joint: precision = answer precision x supporting precision, recall likewise, F1 from those two;
  exact match = answer EM x supporting EM.
"""
from typing import Iterable, NamedTuple, Sequence, Tuple

from .answers import harmonic_f1, squad_normalize, word_overlap  # squad: the official script copies it

YES_NO = ("yes", "no", "noanswer")


class Scores(NamedTuple):
    em: float
    f1: float
    precision: float
    recall: float


def answer_scores(prediction: str, gold: str) -> Scores:
    predicted, wanted = squad_normalize(prediction), squad_normalize(gold)
    em = float(predicted == wanted)
    if (predicted in YES_NO or wanted in YES_NO) and predicted != wanted:
        return Scores(em, 0.0, 0.0, 0.0)
    precision, recall = word_overlap(predicted.split(), wanted.split())
    return Scores(em, harmonic_f1(precision, recall), precision, recall)


def supporting_scores(predicted: Iterable[Sequence], gold: Iterable[Sequence]) -> Scores:
    """``predicted`` and ``gold``: (title, sentence index) pairs (lists or tuples; duplicates count once)."""
    got, wanted = {tuple(f) for f in predicted}, {tuple(f) for f in gold}
    tp = len(got & wanted)
    fp, fn = len(got) - tp, len(wanted) - tp
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    return Scores(float(fp + fn == 0), harmonic_f1(precision, recall), precision, recall)


def joint_scores(answer: Scores, supporting: Scores) -> Scores:
    precision, recall = answer.precision * supporting.precision, answer.recall * supporting.recall
    return Scores(answer.em * supporting.em, harmonic_f1(precision, recall), precision, recall)


def example_scores(prediction: str, gold: str, predicted_facts, gold_facts) -> Tuple[Scores, Scores, Scores]:
    """(answer, supporting facts, joint) scores of one example."""
    answer, supporting = answer_scores(prediction, gold), supporting_scores(predicted_facts, gold_facts)
    return answer, supporting, joint_scores(answer, supporting)
