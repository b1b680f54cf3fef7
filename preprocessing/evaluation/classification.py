"""Classification scores from per-class counts (summed over a whole evaluation)."""
from typing import Iterable, Tuple


def macro_f1(counts: Iterable[Tuple[float, float, float]]) -> float:
    """Mean over classes of F1 = 2 TP / (2 TP + FP + FN), from each class's (TP, FP, FN); a class
    never predicted nor present is skipped."""
    scores = [2 * tp / (2 * tp + fp + fn) for tp, fp, fn in counts if 2 * tp + fp + fn > 0]
    return sum(scores) / len(scores) if scores else 0.0
