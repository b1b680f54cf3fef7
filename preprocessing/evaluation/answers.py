"""Answer texts compared as the official evaluations compare them: normalised, then exact match
and F1 over the normalised words (the max over gold answers is the caller's).

Two normalisations, named by the prepared record's ``normalization``:
- ``squad`` (SQuAD v1.1's ``evaluate-v1.1.py``, which HotpotQA's script copies): lower case,
  ASCII punctuation removed, articles removed, whitespace collapsed;
- ``triviaqa`` (``triviaqa_evaluation.py``): underscores and punctuation (with the typographic
  quotes) to spaces, lower case, articles removed, whitespace collapsed. TriviaQA's gold answers
  are its normalised aliases, and ``longformer-prepare-task`` finds them in the context with it.
"""
import collections
import re
import string
from typing import Callable, Dict, Sequence, Tuple

_ASCII_PUNCTUATION = frozenset(string.punctuation)
# TriviaQA's evaluation treats these as punctuation besides ASCII's
_PUNCTUATION_TO_SPACE = {ord(ch): " " for ch in _ASCII_PUNCTUATION | {"\u2018", "\u2019", "\u00b4", "`"}}
_ARTICLES = frozenset({"a", "an", "the"})


def squad_normalize(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def triviaqa_normalize(text: str) -> str:
    """TriviaQA's normalisation: underscores and punctuation to spaces, lower case, articles
    removed, whitespace collapsed."""
    text = text.replace("_", " ").lower().translate(_PUNCTUATION_TO_SPACE)
    return " ".join(word for word in text.split() if word not in _ARTICLES)


NORMALIZERS: Dict[str, Callable[[str], str]] = {"squad": squad_normalize, "triviaqa": triviaqa_normalize}


def word_overlap(predicted: Sequence[str], gold: Sequence[str]) -> Tuple[float, float]:
    """(precision, recall) of the predicted words against the gold words (multiset overlap);
    (0, 0) when they share none."""
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0, 0.0
    return common / len(predicted), common / len(gold)


def harmonic_f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def exact_match(prediction: str, gold: str, normalize=squad_normalize) -> float:
    return float(normalize(prediction) == normalize(gold))


def f1_score(prediction: str, gold: str, normalize=squad_normalize) -> float:
    return harmonic_f1(*word_overlap(normalize(prediction).split(), normalize(gold).split()))
