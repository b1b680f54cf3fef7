"""HotpotQA's head as the paper describes it (appendix D): "BERT's QA model" (one Linear) for the
answer span, "2 layer feedforward networks" on the sentence and paragraph tokens and a question
type classification head on the first token; each two-layer head computes
out_proj(dropout(activation(dense(x)))), checked against that formula written with torch's
functions."""
import torch
import torch.nn.functional as F
from torch import nn

from fairseq_longformer.conversion.families.longformer import NO_HF_CLASS
from fairseq_longformer.models.heads import LongformerHotpotQAHead

C = 16


def test_structure_two_layers_for_type_and_evidence_one_for_the_span():
    head = LongformerHotpotQAHead(C, dropout=0.2)
    assert isinstance(head.qa_outputs, nn.Linear) and tuple(head.qa_outputs.weight.shape) == (2, C)
    for name, out, activation in (("question_type", 3, nn.Tanh), ("paragraph_score", 1, nn.GELU),
                                  ("sentence_score", 1, nn.GELU)):
        ffn = getattr(head, name)
        assert tuple(ffn.dense.weight.shape) == (C, C) and tuple(ffn.out_proj.weight.shape) == (out, C), name
        assert isinstance(ffn.activation, activation) and ffn.dropout.p == 0.2, name
    assert sum(p.numel() for p in head.parameters()) == 2 * C + 2 + 3 * (C * C + C) + 3 * C + 3 + 2 * (C + 1)


def test_outputs_are_the_two_layer_formula_and_dropout_acts_in_training():
    torch.manual_seed(0)
    head = LongformerHotpotQAHead(C).eval()
    x = torch.randn(2, 7, C)

    def two_layers(ffn, features, activation):
        return F.linear(activation(F.linear(features, ffn.dense.weight, ffn.dense.bias)), ffn.out_proj.weight,
                        ffn.out_proj.bias)

    out = head(x)
    torch.testing.assert_close(out["span"], F.linear(x, head.qa_outputs.weight, head.qa_outputs.bias))
    torch.testing.assert_close(out["type"], two_layers(head.question_type, x[:, 0], torch.tanh))
    torch.testing.assert_close(out["paragraph"], two_layers(head.paragraph_score, x, F.gelu).squeeze(-1))
    torch.testing.assert_close(out["sentence"], two_layers(head.sentence_score, x, F.gelu).squeeze(-1))
    head.train()
    assert not torch.equal(head(x)["sentence"], out["sentence"])  # dropout between the layers


def test_the_export_refusal_knows_the_head_in_both_layouts():
    names = set(LongformerHotpotQAHead(C).state_dict())
    assert [key for key in NO_HF_CLASS if key in names] == ["question_type.out_proj.weight"]
    assert "HotpotQA" in NO_HF_CLASS["question_type.weight"]  # a checkpoint of the one-Linear head
