"""Tiny models of the plugin's registered architectures, built the way fairseq builds them (the
architecture's defaults, then the model class's ``build_model``), on a word dictionary. Used by
the device tests (tests/integration/test_on_device.py) and the compile tests
(tests/plugin/models/test_fullgraph_compile.py)."""
import argparse
import types

import torch

# longformer_base: 2 layers, 32 wide, 4 heads, one-sided window 4
TINY_ENCODER = dict(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4,
                    attention_window="4", max_positions=128)
# led_base: 2 encoder layers (window 4, 64 source positions), 1 decoder layer
TINY_LED = dict(encoder_layers=2, decoder_layers=1, encoder_embed_dim=32, decoder_embed_dim=32,
                encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64, encoder_attention_heads=4,
                decoder_attention_heads=4, attention_window="4", max_source_positions=64,
                max_target_positions=32, task="translation")


def word_dictionary(words=60):
    """fairseq's specials, ``words`` words w0, w1, ... and <mask>."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for i in range(words):
        dictionary.add_symbol(f"w{i}")
    dictionary.add_symbol("<mask>")
    return dictionary


def build_registered(arch: str, dictionary, **sizes):
    """A model of the registered ``arch`` built through fairseq's registries, dropout 0, seed 0."""
    import fairseq_longformer  # noqa: F401  (registers the plugin's architectures)
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    args = argparse.Namespace(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, **sizes)
    ARCH_CONFIG_REGISTRY[arch](args)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None,
                                 max_positions=lambda: 128)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task)
