"""Logging shared by the fine-tuning criteria: the loss in bits per ``sample_size`` unit, and
percentages summed over batches (``sum(numerator) / sum(denominator)`` over the whole
validation, not a mean of per-batch ratios)."""
import math
from typing import Callable, Dict, Optional

from fairseq.logging import metrics


def log_loss(logging_outputs) -> Optional[Callable[[str], float]]:
    """Log ``loss`` (bits, fairseq's convention); return a summing function of the logging
    outputs, or None when the batch holds nothing."""
    def total(key: str) -> float:
        return sum(float(log.get(key, 0)) for log in logging_outputs)

    sample_size = total("sample_size")
    if sample_size == 0:
        return None
    metrics.log_scalar("loss", total("loss") / sample_size / math.log(2), sample_size, round=3)
    return total


def log_percents(numerators: Dict[str, str], denominator: str, total: Callable[[str], float]) -> None:
    """Sum each numerator and the denominator over batches; metric ``name`` = 100 x its numerator's
    sum / the denominator's sum. The denominator is summed once, however many metrics share it
    (summing it once per metric counted every example twice: QA's EM and F1 came out halved)."""
    for key in (*numerators.values(), denominator):
        metrics.log_scalar_sum(key, total(key))
    for name, numerator in numerators.items():
        metrics.log_derived(name, lambda m, numerator=numerator: round(
            100.0 * m[numerator].sum / max(m[denominator].sum, 1), 2))
