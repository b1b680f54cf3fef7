"""The LED encoder against BART's dense encoder: forward and forward+backward of the whole
encoder (embeddings, every layer) on the same input, time and peak memory, measured with
``longformer-bench``'s machinery (``workers.run_side_by_side``: memory in fresh processes, the two
encoders timed side by side, round-robin). The console script is
``longformer_tools/cli/bench_led.py``.

The two contenders hold the same weights: a random fairseq BART with ``bart_positions`` learned
encoder positions (seed ``case.seed``) whose position table is tiled to the input's length, the
way ``longformer-convert-bart`` extends it (``fairseq_longformer.conversion.extend_positions``),
then

  led    that state loaded into the registered ``led_base`` architecture, whose state-dict
         upgrade starts the global projections as copies of Q, K, V (as the converter does);
         one-sided window ``case.window``, the first token global (the LED's default);
  dense  fairseq's own BART encoder with the tiled table: every token attends every token.

Dropout is 0 in both (the two compute one deterministic function, and the benchmark compares
attention, not dropout masks). Only the encoder is measured; the model built around it has one
decoder layer, which is never called.

Shapes: src_tokens (B, N); encoder output (N, B, C), handed out as (B, N, C).
"""
import argparse
import types
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor

from .contenders import Case
from .measure import Result, WholeModelRunner
from .ratios import format_model_rows, model_vs_baseline_rows
from .workers import call_in_fresh_process

ENCODERS = ("led", "dense")  # "dense": the baseline the bench's ratios are taken against
BART_VOCAB = 50265  # bart.base / bart.large: the token table (and its gradient) as in practice
BART_ARCH, LED_ARCH = "bart_base", "led_base"  # registered architectures; sizes come from the case
POSITIONS_KEY = "encoder.embed_positions.weight"  # fairseq's name of the encoder's learned positions


@dataclass
class EncoderCase(Case):
    """One encoder at one length: ``impl`` is "led" or "dense"; ``window`` is the LED's
    one-sided w; heads * head_dim is the width (bart.base: 12 x 64 = 768)."""

    layers: int = 6
    ffn: int = 3072
    vocab: int = BART_VOCAB
    window: int = 512
    bart_positions: int = 1024
    seed: int = 0
    checkpoint_activations: bool = False  # fairseq's --checkpoint-activations (longformer-bench train-steps)

    @property
    def positions(self) -> int:
        """Encoder positions after tiling: the smallest multiple of BART's that holds the input."""
        return -(-self.length // self.bart_positions) * self.bart_positions

    def make_runner(self) -> "EncoderRunner":
        return EncoderRunner(self)


def _model_args(case: EncoderCase, positions: int, arch) -> argparse.Namespace:
    """Architecture flags of a model with ``case``'s encoder and ``positions`` encoder positions."""
    args = argparse.Namespace(
        encoder_layers=case.layers, decoder_layers=1, encoder_embed_dim=case.hidden, decoder_embed_dim=case.hidden,
        encoder_ffn_embed_dim=case.ffn, decoder_ffn_embed_dim=case.ffn, encoder_attention_heads=case.heads,
        decoder_attention_heads=case.heads, max_source_positions=positions,
        max_target_positions=case.bart_positions, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        attention_window=str(case.window), attention_dilation="1",
        task="translation",  # BART's state-dict upgrade asks which task
        checkpoint_activations=case.checkpoint_activations,
    )
    arch(args)
    return args


def _dictionary(vocab: int):
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for index in range(vocab - len(dictionary)):
        dictionary.add_symbol(f"w{index}")
    return dictionary


def build_encoder(case: EncoderCase, impl: Optional[str] = None):
    """(encoder in eval mode, dictionary) for ``impl`` (default ``case.impl``), both built from the
    same random BART (seed ``case.seed``) with the table tiled to ``case.positions``."""
    import fairseq_longformer  # noqa: F401  (registers the led architectures)
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
    from fairseq_longformer.conversion import extend_positions

    impl = impl or case.impl
    if impl not in ENCODERS:
        raise ValueError(f"unknown encoder {impl!r}; expected one of {ENCODERS}")
    arch = LED_ARCH if impl == "led" else BART_ARCH
    dictionary = _dictionary(case.vocab)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None)
    torch.manual_seed(case.seed)
    bart = ARCH_MODEL_REGISTRY[BART_ARCH].build_model(
        _model_args(case, case.bart_positions, ARCH_CONFIG_REGISTRY[BART_ARCH]), task)
    state = bart.state_dict()
    del bart
    state[POSITIONS_KEY] = extend_positions(state[POSITIONS_KEY], case.positions, padding_idx=dictionary.pad())
    model = ARCH_MODEL_REGISTRY[arch].build_model(_model_args(case, case.positions, ARCH_CONFIG_REGISTRY[arch]), task)
    model.load_state_dict(state, strict=True)
    return model.encoder.eval(), dictionary


def encoder_inputs(case: EncoderCase, length: int, dictionary) -> Dict[str, Tensor]:
    """src_tokens (B, N) random tokens ending in </s>, src_lengths (B,), grad_out (N, B, C)."""
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(dictionary.nspecial, len(dictionary), (case.batch, length), generator=gen)
    tokens[:, -1] = dictionary.eos()
    grad_out = torch.randn(length, case.batch, case.hidden, generator=gen)
    return {"src_tokens": tokens, "src_lengths": torch.full((case.batch,), length), "grad_out": grad_out}


class EncoderRunner(WholeModelRunner):
    """A ``Runner`` (``timed``, ``first_timing``) whose calls run a whole encoder on tokens."""

    benchmark = "encoder"

    def build(self, case: EncoderCase):
        return build_encoder(case)

    def warmup_length(self, case: EncoderCase) -> int:
        return 2 * case.window

    def set_inputs(self, length: int) -> None:
        self.inputs = encoder_inputs(self.case, length, self.dictionary)

    def _encode(self) -> Tensor:
        out = self.module(self.inputs["src_tokens"], src_lengths=self.inputs["src_lengths"])
        return out["encoder_out"][0]  # (N, B, C)

    def fwd(self) -> Tensor:
        """(B, N, C) encoder output, no gradients."""
        with torch.no_grad():
            return self._encode().transpose(0, 1)

    def fwd_bwd(self) -> Tensor:
        """(B, N, C) encoder output, after the backward pass into every weight."""
        for p in self.module.parameters():
            p.grad = None  # as optimizer.zero_grad(set_to_none=True) leaves them
        out = self._encode()
        out.backward(self.inputs["grad_out"])
        return out.detach().transpose(0, 1)


def window_covering_difference(case: EncoderCase) -> float:
    """Largest |LED - dense| of the encoder outputs at ``case.length``, which must fit in the
    window (N <= w + 1): there the LED computes BART's function, so this is rounding only."""
    if case.length > case.window + 1:
        raise ValueError(f"N={case.length} is beyond the window w={case.window}: the outputs differ by design")
    torch.set_num_threads(case.threads)
    outputs = []
    for impl in ENCODERS:
        encoder, dictionary = build_encoder(case, impl)
        inputs = encoder_inputs(case, case.length, dictionary)
        with torch.no_grad():
            outputs.append(encoder(inputs["src_tokens"], src_lengths=inputs["src_lengths"])["encoder_out"][0])
        del encoder
    return (outputs[0] - outputs[1]).abs().max().item()


def check_in_fresh_process(case: EncoderCase) -> float:
    """``window_covering_difference`` in a forked child (``workers.call_in_fresh_process``)."""
    return call_in_fresh_process(window_covering_difference, case)


def ratio_rows(results: List[Result]) -> List[dict]:
    """JSON rows of ``results``, the LED's with its ratios against the dense encoder at its length
    (``report.model_vs_baseline_rows``): speedup = dense time / LED time (> 1: the LED faster),
    memory ratio = LED peak / dense peak (< 1: the LED needs less)."""
    return model_vs_baseline_rows(results, "led", "dense")


def format_rows(rows: List[dict]) -> str:
    """The table: a line per (length, encoder), the LED's ratios to the dense encoder."""
    return format_model_rows(rows, ENCODERS, impl_heading="encoder")
