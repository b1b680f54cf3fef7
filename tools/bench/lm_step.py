"""One training step of the char-LM: ``longformer_lm`` against the same model with dense
attention, time and peak memory, measured with ``longformer-bench``'s machinery (``workers``:
memory in fresh processes, the two models timed side by side, round-robin). The command line is
``longformer_tools/cli/bench_lm.py``.

The two contenders are one model: a random ``longformer_lm_small`` (seed ``case.seed``, learned
positions for the case's length, or Transformer-XL's relative positions with
``case.relative_positions``; the architecture's windows growing over the layers and its
dilation on 2 heads of the upper half), and

  longformer  as built: causal dilated sliding windows (``LongformerSelfAttention``, the PyTorch
              path on CPU);
  dense       the same model object with every layer's self-attention replaced by
              ``DenseCausalSelfAttention``: the same q/k/v/out projections (the same parameter
              tensors), ``F.scaled_dot_product_attention`` with the layer's causal dilated window
              as a boolean (N, N) mask, one call per run of heads that share a dilation; with
              relative positions the mask is float, Transformer-XL's dense (B, H, N, N)
              position scores with -inf outside the window, as its own code computes them.

``loss_check`` computes both losses (eval mode, no dropout) on the same characters before anything
is timed; the benchmark stops when they differ by more than its tolerance. The timed step is
forward + cross-entropy + backward into every weight in training mode (the architecture's
dropout), batch ``case.batch``; "fwd" is the eval-mode forward without gradients.

Shapes: tokens (B, N); hidden states (N, B, C) inside the decoder as in fairseq; logits (B, N, V).
"""
import argparse
import types
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq_longformer import sinusoid
from .contenders import Case
from .measure import Result, WholeModelRunner
from .ratios import format_model_rows, model_vs_baseline_rows
from .workers import call_in_fresh_process

MODELS = ("longformer", "dense")  # "dense": the baseline the ratios are taken against
CHAR_VOCAB = 256  # byte-level characters (enwik8's alphabet fits)


@dataclass
class LMStepCase(Case):
    """One model at one length: ``impl`` is "longformer" or "dense"; heads * head_dim is the
    width (longformer_lm_small: 8 x 64 = 512).

    dense_window_offset widens the dense masks' windows by that many keys (testing only: the
    loss check must then fail)."""

    arch: str = "longformer_lm_small"
    heads: int = 8
    head_dim: int = 64
    vocab: int = CHAR_VOCAB
    seed: int = 0
    checkpoint_activations: bool = False
    relative_positions: bool = False
    dense_window_offset: int = 0

    def make_runner(self) -> "LMStepRunner":
        return LMStepRunner(self)


def causal_dilated_mask(length: int, window: int, dilation: int, device=None) -> Tensor:
    """(N, N) bool, True where query i may attend key j: j = i - s * d for s = 0 .. w, the
    causal pattern of ``kernels/pattern.py``, built without any (N, N) integer temporary."""
    mask = torch.ones(length, length, dtype=torch.bool, device=device).tril_().triu_(-window * dilation)
    if dilation > 1:
        residue = torch.arange(length, device=device) % dilation
        mask &= residue[:, None] == residue[None, :]
    return mask


class DenseCausalSelfAttention(nn.Module):
    """The dense stand-in for one layer's ``LongformerSelfAttention`` in fairseq's decoder-layer
    call: query (N, B, C) -> ((N, B, C), None), no padding, no incremental state.

    Holds the replaced module's projections (the same parameters, not copies). Heads come in runs
    of equal dilation (the paper's: 6 undilated, 2 dilated); each run is one SDPA call with its
    (N, N) mask, built in the forward, as a model computing this pattern densely would.
    """

    def __init__(self, attention: nn.Module, window_offset: int = 0):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = attention.q_proj, attention.k_proj, attention.v_proj
        self.out_proj = attention.out_proj
        self.relative_positions = attention.relative_positions  # the same W_R, u, v; or None
        self.num_heads, self.head_dim = attention.num_heads, attention.head_dim
        pattern = attention.config.pattern
        if not pattern.causal:
            raise ValueError("the dense char-LM contender needs a causal pattern")
        self.window = pattern.window + window_offset
        dilations = pattern.dilation_per_head(self.num_heads)
        self.runs: List[Tuple[int, int, int]] = []  # (first head, end head, dilation)
        for head, d in enumerate(dilations):
            if self.runs and self.runs[-1][2] == d:
                self.runs[-1] = (self.runs[-1][0], head + 1, d)
            else:
                self.runs.append((head, head + 1, d))

    def forward(self, query: Tensor, key=None, value=None, key_padding_mask=None, incremental_state=None,
                need_weights: bool = False, attn_mask=None, **unused) -> Tuple[Tensor, None]:
        # attn_mask: None (the Longformer decoder makes no future mask), or fairseq's (N, N) one,
        # which every mask below implies
        if key_padding_mask is not None or incremental_state is not None:
            raise ValueError("the dense benchmark contender has no padding and no incremental decoding")
        length, batch, embed = query.shape
        q, k, v = (p(query).view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
                   for p in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, N, D)
        positions = None
        if self.relative_positions is not None:
            q, positions = self._relative_terms(q)
        parts = []
        for first, end, dilation in self.runs:
            mask = causal_dilated_mask(length, self.window, dilation, query.device)
            if positions is not None:  # a float mask: the position scores inside the window
                mask = positions[:, first:end].masked_fill(~mask, float("-inf"))
            parts.append(F.scaled_dot_product_attention(q[:, first:end], k[:, first:end], v[:, first:end],
                                                        attn_mask=mask))
        out = torch.cat(parts, dim=1).permute(2, 0, 1, 3).reshape(length, batch, embed)
        return self.out_proj(out), None

    def _relative_terms(self, q: Tensor) -> Tuple[Tensor, Tensor]:
        """Transformer-XL's dense position scores, as its own code computes them: q (B, H, N, D) ->
        (q + u, scale * (q + v) . W_R r_{i-j}: (B, H, N, N), valid for j <= i).

        (q + v) meets W_R r_delta for every distance N-1 .. 0 in one matmul, then Transformer-XL's
        "relative shift" turns column k (distance N-1-k) into key j = i - delta: here a strided
        view of the flat scores, row i starting N-1-i columns in (entries j > i read the next
        row and are masked by the caller)."""
        rel = self.relative_positions
        length, dim = q.shape[2], self.num_heads * self.head_dim
        distances = torch.arange(length - 1, -1, -1, device=q.device)
        weight = rel.r_proj.weight.view(self.num_heads, self.head_dim, dim)
        table = torch.einsum("nc,hdc->hnd", sinusoid(distances, dim).to(weight.dtype), weight)  # (H, N, D)
        u = rel.biases.content_bias[None, :, None, :]
        v = rel.biases.position_bias[None, :, None, :]
        by_distance = torch.einsum("bhid,hnd->bhin", (q + v) * rel.scale, table).contiguous()  # (B, H, N, N)
        batch, heads = by_distance.shape[:2]
        shifted = by_distance.as_strided((batch, heads, length, length),
                                         (heads * length * length, length * length, length - 1, 1),
                                         by_distance.storage_offset() + length - 1)
        return q + u, shifted

    def _get_input_buffer(self, incremental_state) -> dict:
        return {}  # fairseq's decoder layer asks every self-attention for it


def _dictionary(vocab: int):
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for index in range(vocab):
        dictionary.add_symbol(f"c{index}")
    return dictionary


def build_lm(case: LMStepCase, impl: Optional[str] = None):
    """(model in eval mode, dictionary) for ``impl`` (default ``case.impl``): the architecture
    ``case.arch`` with ``case.length`` positions, random weights from ``case.seed``; "dense"
    swaps every layer's attention for ``DenseCausalSelfAttention`` on the same parameters."""
    import fairseq_longformer  # noqa: F401  (registers longformer_lm)
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    impl = impl or case.impl
    if impl not in MODELS:
        raise ValueError(f"unknown model {impl!r}; expected one of {MODELS}")
    dictionary = _dictionary(case.vocab)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    args = argparse.Namespace(
        tokens_per_sample=case.length, max_target_positions=case.length, decoder_embed_dim=case.hidden,
        decoder_attention_heads=case.heads, checkpoint_activations=case.checkpoint_activations,
        relative_positions=case.relative_positions)
    ARCH_CONFIG_REGISTRY[case.arch](args)
    torch.manual_seed(case.seed)
    model = ARCH_MODEL_REGISTRY[case.arch].build_model(args, task)
    if impl == "dense":
        for layer in model.decoder.layers:
            layer.self_attn = DenseCausalSelfAttention(layer.self_attn, case.dense_window_offset)
    return model.eval(), dictionary


def lm_inputs(case: LMStepCase, length: int, dictionary) -> Tuple[Tensor, Tensor]:
    """(tokens, target), both (B, N): random characters, the target the next character."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(dictionary.nspecial, len(dictionary), (case.batch, length + 1), generator=gen)
    ids[:, 0] = dictionary.eos()  # as fairseq's language_modeling blocks start
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def lm_loss(model, tokens: Tensor, target: Tensor) -> Tuple[Tensor, Tensor]:
    """(mean cross-entropy in nats, logits (B, N, V))."""
    logits = model(tokens)[0]
    return F.cross_entropy(logits.float().flatten(0, 1), target.flatten()), logits


class LMStepRunner(WholeModelRunner):
    """A ``Runner`` (``timed``, ``first_timing``) whose calls run the whole char-LM on characters."""

    benchmark = "char-LM step"

    def build(self, case: LMStepCase):
        return build_lm(case)

    def warmup_length(self, case: LMStepCase) -> int:
        return 256

    def set_inputs(self, length: int) -> None:
        self.tokens, self.target = lm_inputs(self.case, length, self.dictionary)

    def fwd(self) -> Tensor:
        """(B, N, V) logits of the eval-mode model, no gradients (inference)."""
        self.module.eval()
        with torch.no_grad():
            return lm_loss(self.module, self.tokens, self.target)[1]

    def fwd_bwd(self) -> Tensor:
        """One training step's forward and backward (training mode: the architecture's dropout)
        into every weight; returns the loss."""
        self.module.train()
        for p in self.module.parameters():
            p.grad = None  # as optimizer.zero_grad(set_to_none=True) leaves them
        loss, _ = lm_loss(self.module, self.tokens, self.target)
        loss.backward()
        return loss.detach()


def eval_losses(case: LMStepCase) -> Tuple[float, float, float]:
    """(longformer loss, dense loss, largest |logit difference|), losses in nats, eval mode, on
    ``case``'s characters at its length. The mean loss can hide small differences in fp32
    rounding; the logits show them."""
    torch.set_num_threads(case.threads)
    losses, logits = [], []
    for impl in MODELS:
        model, dictionary = build_lm(case, impl)
        tokens, target = lm_inputs(case, case.length, dictionary)
        with torch.no_grad():
            loss, out = lm_loss(model, tokens, target)
        losses.append(float(loss))
        logits.append(out)
        del model
    return losses[0], losses[1], float((logits[0] - logits[1]).abs().max())


def loss_check(case: LMStepCase) -> Tuple[float, float, float]:
    """``eval_losses`` in a forked child (``workers.call_in_fresh_process``)."""
    return call_in_fresh_process(eval_losses, case)


def ratio_rows(results: List[Result]) -> List[dict]:
    """JSON rows of ``results``, Longformer's with its ratios against the dense model at its length
    (``report.model_vs_baseline_rows``): speedup = dense time / Longformer time (> 1: Longformer
    faster), memory ratio = Longformer peak / dense peak (< 1: Longformer needs less)."""
    return model_vs_baseline_rows(results, "longformer", "dense")


def format_rows(rows: List[dict]) -> str:
    """The table: a line per (length, model), Longformer's ratios to the dense model."""
    return format_model_rows(rows, MODELS, fwd_bwd="step",
                             preface="step = forward + loss + backward (training mode); ")
