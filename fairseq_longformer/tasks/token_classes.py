"""The global-attention pattern as data: every token of a fine-tuning input carries a class id,
and the task's configuration (``--global-classes``) names the classes that attend globally.

The dataset items say *what* each token is (``<s>``, question, candidate, title, sentence
marker); which of those are global is a run's choice, so ablations (the paper's Table 10: no
global attention, or global on the question only) change a flag, not code.
"""
from typing import FrozenSet

import torch

TOKEN_CLASSES = {"none": 0, "question": 1, "candidate": 2, "title": 3, "sentence": 4, "cls": 5}
NONE, QUESTION, CANDIDATE, TITLE, SENTENCE, CLS = (TOKEN_CLASSES[name] for name in
                                                   ("none", "question", "candidate", "title", "sentence", "cls"))


def parse_global_classes(text: str, task_default: str) -> FrozenSet[int]:
    """``"question,candidate"`` -> their class ids; an empty ``text`` means the task's default.
    Raises ValueError naming an unknown class and the known ones."""
    names = [n.strip() for n in (text or task_default).split(",") if n.strip()]
    unknown = [n for n in names if n not in TOKEN_CLASSES or n == "none"]
    if unknown:
        known = ", ".join(n for n in TOKEN_CLASSES if n != "none")
        raise ValueError(f"--global-classes {text!r}: unknown token class {unknown[0]!r}; choose from {known}")
    return frozenset(TOKEN_CLASSES[n] for n in names)


def global_flags(classes: torch.Tensor, enabled: FrozenSet[int]) -> torch.Tensor:
    """classes (N,) int -> (N,) bool, True where the token's class is enabled."""
    flags = torch.zeros(classes.shape, dtype=torch.bool)
    for class_id in enabled:
        flags |= classes == class_id
    return flags
