"""Fixtures the experiments' tests share with the fine-tuning tests: the global-attention ablation
checks its receptive field on the same small classification data and tiny model."""
from tests.finetune.conftest import classification_data, kjv_jsonl  # noqa: F401  (pytest fixtures)
