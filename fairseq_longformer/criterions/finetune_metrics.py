"""Logging shared by the fine-tuning criteria: the loss in bits per ``sample_size`` unit, and
percentages summed over batches (``sum(numerator) / sum(denominator)`` over the whole
validation, not a mean of per-batch ratios)."""
import math
from typing import Callable, Optional

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


def log_percent(name: str, numerator: str, denominator: str, total: Callable[[str], float]) -> None:
    """Sum ``numerator`` and ``denominator`` over batches; ``name`` = 100 x their ratio."""
    metrics.log_scalar_sum(numerator, total(numerator))
    metrics.log_scalar_sum(denominator, total(denominator))
    metrics.log_derived(name, lambda m: round(100.0 * m[numerator].sum / max(m[denominator].sum, 1), 2))
