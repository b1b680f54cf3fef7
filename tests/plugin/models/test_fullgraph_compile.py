"""``torch.compile(fullgraph=True)`` of the encoder (longformer), the LM (longformer_lm) and the
LED encoder, each built tiny through fairseq's builders: one graph per model (a graph break
raises), compiled once for two calls whose global counts or padding differ (no recompilation:
the global tensors are sized by the static ``max_global_tokens``, nothing is read to the host),
with the outputs and every parameter's gradient of eager, whose masks read the counts to the host
(the exact path, ``AttentionMasks`` without a bound).

Backend ``aot_eager``: dynamo's whole-graph capture and AOT autograd's joint forward and backward
graph, the parts a graph break or a data-dependent shape fails, without inductor's C++ code
generation (which would cost minutes of 2 CPU cores). Inductor with CUDA graphs
(``mode="reduce-overhead"``) runs in tests/integration/test_on_device.py with ``--device cuda``.
float64, so that eager and compiled agree to rounding.
"""
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from fairseq_longformer.models.led import first_token_global
from tests.plugin.conversion.test_hf import global_mask, padded_batch
from tests.support.registry_models import TINY_ENCODER, TINY_LED, build_registered, word_dictionary

# one layer each (tracing time grows with the layers, and every layer is the same code); the LM's
# heads of two dilations
ONE_LAYER = dict(encoder_layers=1)
TINY_LM = dict(decoder_layers=1, decoder_embed_dim=32, decoder_ffn_embed_dim=64, decoder_attention_heads=4,
               attention_window="4", attention_dilation="1:1:2:2", tokens_per_sample=128)


def _step(module, run, args, kwargs, features):
    """(output, {name: gradient of each parameter of ``module``}) of run(*args, **kwargs) (the
    module or its compiled form), backward from a fixed random weighting of ``features(result)``."""
    module.zero_grad(set_to_none=True)
    out = features(run(*args, **kwargs))
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=out.dtype)
    (out * weights).sum().backward()
    return out.detach(), {name: p.grad for name, p in module.named_parameters() if p.grad is not None}


def _compiled_matches_eager(module, calls, features):
    """Each call is (args, compiled kwargs, eager kwargs). One compiled frame for all of them."""
    module = module.double().eval()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(module, backend=counter, fullgraph=True, dynamic=False)
    for args, compiled_kwargs, eager_kwargs in calls:
        want_out, want_grads = _step(module, module, args, eager_kwargs, features)
        got_out, got_grads = _step(module, compiled, args, compiled_kwargs, features)
        torch.testing.assert_close(got_out, want_out)
        assert got_grads.keys() == want_grads.keys()
        for name, grad in got_grads.items():
            torch.testing.assert_close(grad, want_grads[name], msg=lambda m: f"grad {name}: {m}")
    assert counter.frame_count == 1, f"{counter.frame_count} compilations for {len(calls)} calls"


def test_encoder_compiles_whole_while_the_global_count_changes():
    """1 and 2 global tokens, then 3 and 0 (and no padding): one graph under the bound 4."""
    dictionary = word_dictionary()
    encoder = build_registered("longformer_base", dictionary, **{**TINY_ENCODER, **ONE_LAYER}).encoder.sentence_encoder
    calls = []
    for lengths, rows in (([64, 40], {0: [0], 1: [5, 20]}), ([64, 64], {0: [0, 1, 2], 1: []})):
        src = padded_batch(dictionary, lengths)
        glob = global_mask(src.shape, rows)
        calls.append(((src,), dict(global_attention_mask=glob, max_global_tokens=4),
                      dict(global_attention_mask=glob)))
    _compiled_matches_eager(encoder, calls, lambda result: result["encoder_out"][0])


def test_causal_lm_compiles_whole_with_and_without_padding():
    """fairseq's decoder reads "is any token padding?" to the host; compiled, it does not."""
    dictionary = word_dictionary()
    decoder = build_registered("longformer_lm", dictionary, **TINY_LM).decoder
    calls = [((padded_batch(dictionary, lengths),), {}, {}) for lengths in ([64, 40], [64, 64])]
    _compiled_matches_eager(decoder, calls, lambda result: result[0])


def test_led_encoder_compiles_whole_with_its_default_global_token():
    """Without a mask each row's first token is global: at most one per row, a static bound. Eager
    gets the same mask given explicitly, without the bound (the exact path)."""
    dictionary = word_dictionary()
    encoder = build_registered("led_base", dictionary, **{**TINY_LED, **ONE_LAYER}).encoder
    calls = []
    for lengths in ([64, 40], [64, 64]):
        src = padded_batch(dictionary, lengths)
        calls.append(((src,), {}, dict(global_attention_mask=first_token_global(src, dictionary.pad()))))
    _compiled_matches_eager(encoder, calls, lambda result: result["encoder_out"][0])
