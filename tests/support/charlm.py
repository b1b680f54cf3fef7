"""Tiny ``longformer_lm`` models built the way fairseq builds them (architecture defaults, then
the model's builder), a character dictionary, and random character sequences."""
import argparse

import torch
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

import fairseq_longformer  # noqa: F401  (registers the plugin)

# 3 layers, 4 heads of 8 dims; windows 2, 3, 5 with dilations up to 3 in the upper layers, so a
# 40-character sequence is much longer than any layer's reach (w * d <= 15) and the cache
# bound matters. No dropout, so training-mode and eval-mode forwards agree.
TINY = dict(decoder_layers=3, decoder_embed_dim=32, decoder_ffn_embed_dim=48, decoder_attention_heads=4,
            attention_window="2,3,5", attention_dilation="1,1:1:2:2,1:2:3:3", dropout=0.0,
            attention_dropout=0.0, activation_dropout=0.0, tokens_per_sample=64)


class CharTask:
    """What fairseq's model builders and generators ask of a task: the dictionaries."""

    def __init__(self, alphabet="abcdefghijklmnopqrstuvwxyz _.,"):
        self.source_dictionary = self.target_dictionary = Dictionary()
        for c in alphabet:
            self.source_dictionary.add_symbol(c)


def build_lm(task=None, arch="longformer_lm", dtype=torch.float64, **overrides):
    """(model in eval mode and ``dtype``, task). ``overrides`` replace TINY's entries."""
    task = task or CharTask()
    args = argparse.Namespace(**{**TINY, **overrides})
    ARCH_CONFIG_REGISTRY[arch](args)
    torch.manual_seed(0)
    model = ARCH_MODEL_REGISTRY[arch].build_model(args, task)
    return model.to(dtype).eval(), task


def characters(task, batch, length, seed=0):
    """(B, N) random character ids, each row starting with </s> as fairseq's LM inputs do."""
    d = task.source_dictionary
    gen = torch.Generator().manual_seed(seed)
    out = torch.randint(d.nspecial, len(d), (batch, length), generator=gen)
    out[:, 0] = d.eos()
    return out
