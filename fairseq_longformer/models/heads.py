"""Task heads of the ``longformer`` model beyond RoBERTa's own classification heads.

``LongformerSpanHead``: extractive QA, one Linear (C -> 2) per token giving start and end logits,
the layout of Hugging Face's ``LongformerForQuestionAnswering.qa_outputs``. The heads live in
``model.span_heads`` (a ModuleDict next to RoBERTa's ``classification_heads``, which must have
``dense``/``out_proj`` layers for RoBERTa's checkpoint upgrade) and are called through
``model(src_tokens, span_head_name=...)``.

``LongformerCandidateHead``: multiple choice (WikiHop), one Linear (C -> 1) per token; the task
reads its logit at each candidate's ``[ent]`` token. It lives in ``model.span_heads`` too (a
per-token head like the span head, so the same forward and checkpoint upgrade serve it).

``LongformerHotpotQAHead``: HotpotQA's four outputs from one encoder pass: answer start/end logits
per token (as the span head: "BERT's QA model", one Linear), the question type (span / yes / no)
from the ``<s>`` features, and one supporting-fact logit per token for paragraphs (read at each
``<t>``) and for sentences (read at each ``[s]``). The paper (appendix D, HotpotQA) applies "2 layer
feedforward networks" to the sentence and paragraph tokens and "a question type classification
head" to the first token: here all three are ``TwoLayerHead`` (Linear C -> C, activation, dropout,
Linear); the paper names no activation: GELU for the evidence scores (the encoder's), tanh for
the question type (RoBERTa's classification head). Also in ``model.span_heads``; it has no
transformers class (the export refuses it and says how to export the encoder).
"""
import logging
from typing import Dict, MutableMapping

from torch import Tensor, nn

logger = logging.getLogger(__name__)


class LongformerSpanHead(nn.Module):
    """features (B, N, C) -> logits (B, N, 2): [..., 0] start, [..., 1] end."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.qa_outputs = nn.Linear(embed_dim, 2)

    def forward(self, features: Tensor) -> Tensor:
        return self.qa_outputs(features)


class LongformerCandidateHead(nn.Module):
    """features (B, N, C) -> logits (B, N): one score per token, read at the candidates' [ent]."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.candidate_score = nn.Linear(embed_dim, 1)

    def forward(self, features: Tensor) -> Tensor:
        return self.candidate_score(features).squeeze(-1)


# How the supporting facts are read from the paragraph and sentence logits (the task's
# --evidence-decoding; criterions/hotpotqa_decoding.py implements both)
EVIDENCE_DECODINGS = ("two_paragraphs", "threshold")
# Where the answer span may lie (the task's --answer-decoding; the same module implements it)
ANSWER_DECODINGS = ("anywhere", "evidence")


class TwoLayerHead(nn.Module):
    """features (..., C) -> (..., out): dense (C -> C), activation, dropout, out_proj (C -> out)."""

    def __init__(self, embed_dim: int, out: int, activation: nn.Module, dropout: float):
        super().__init__()
        self.dense = nn.Linear(embed_dim, embed_dim)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(embed_dim, out)

    def forward(self, features: Tensor) -> Tensor:
        return self.out_proj(self.dropout(self.activation(self.dense(features))))


class LongformerHotpotQAHead(nn.Module):
    """features (B, N, C) -> {"span": (B, N, 2) start and end, "type": (B, 3) span/yes/no logits
    from features[:, 0], "paragraph": (B, N), "sentence": (B, N)}. ``dropout``: between the two
    layers of the type and evidence heads (0.1, RoBERTa's hidden dropout: the paper gives none)."""

    QUESTION_TYPES = 3  # 0 a span of the context, 1 yes, 2 no

    def __init__(self, embed_dim: int, dropout: float = 0.1):
        super().__init__()
        self.qa_outputs = nn.Linear(embed_dim, 2)
        self.question_type = TwoLayerHead(embed_dim, self.QUESTION_TYPES, nn.Tanh(), dropout)
        self.paragraph_score = TwoLayerHead(embed_dim, 1, nn.GELU(), dropout)
        self.sentence_score = TwoLayerHead(embed_dim, 1, nn.GELU(), dropout)

    def forward(self, features: Tensor) -> Dict[str, Tensor]:
        return {"span": self.qa_outputs(features), "type": self.question_type(features[:, 0]),
                "paragraph": self.paragraph_score(features).squeeze(-1),
                "sentence": self.sentence_score(features).squeeze(-1)}


def upgrade_span_heads(span_heads: nn.ModuleDict, state_dict: MutableMapping[str, Tensor], prefix: str) -> None:
    """Make ``state_dict`` fit the model's span heads: a checkpoint without them (a pretrained
    or converted model) gets the new heads' current weights; heads the model does not have, or
    of another width, are dropped with a warning (as RoBERTa does for classification heads)."""
    head_prefix = prefix + "span_heads."
    current = span_heads.state_dict()
    for key in [k for k in state_dict if k.startswith(head_prefix)]:
        local = key[len(head_prefix):]
        if local not in current or state_dict[key].shape != current[local].shape:
            logger.warning(f"dropping span head weight {key} from the checkpoint: not in the current model "
                           "or of another shape")
            del state_dict[key]
    for local, value in current.items():
        state_dict.setdefault(head_prefix + local, value)
