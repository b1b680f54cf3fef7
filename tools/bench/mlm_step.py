"""One masked-LM training step: our Longformer masked LM against Hugging Face's
``LongformerForMaskedLM`` holding the same weights, time and peak memory, measured with
``longformer-bench``'s machinery (``workers``: memory in fresh processes, the two models timed
side by side, round-robin). The command line is ``longformer_tools/cli/bench_mlm.py``.

The two contenders are one function:

  longformer    fairseq's ``longformer_base`` architecture with the case's sizes, built through
                fairseq's registries (``build_longformer``) from seed ``case.seed``; the step is
                the plugin's registered ``longformer_mlm`` criterion (what fairseq-train runs),
                which sends only the masked positions through the LM head.
  transformers  ``transformers.LongformerForMaskedLM`` holding the same weights, converted
                through the plugin's exporter (``fairseq_longformer.conversion.to_hf_masked_lm``:
                its key map, config and checks; attention_window = 2w, the same dropout rates);
                the step is its forward with ``labels``, which scores every position and takes
                the loss over the masked ones.

``loss_check`` computes both losses (eval mode, no dropout) on the same tokens before anything is
timed; the benchmark stops when they differ by more than its tolerance. The timed step is forward
+ masked-LM loss + backward into every weight in training mode (hidden and attention dropout
``case.hidden_dropout``, ``case.attention_dropout``); "fwd" is the eval-mode forward without
gradients, every position's logits.

Inputs: random tokens (B, N) starting with <s> and ending with </s>; ``MASK_RATE`` of each row's
positions (drawn once, seed 1) replaced by <mask>, the original tokens their targets.
Shapes: tokens (B, N); logits (B, N, V).
"""
import argparse
import types
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from .contenders import Case
from .measure import Result, WholeModelRunner
from .ratios import fmt, model_vs_baseline_rows
from .workers import call_in_fresh_process

MODELS = ("longformer", "transformers")  # "transformers": the baseline the ratios are taken against
ARCH = "longformer_base"  # the registered architecture; sizes come from the case
MASK_RATE = 0.15  # share of each row's positions masked, as RoBERTa's pretraining
HF_IGNORE = -100  # transformers' label of a position without a target


@dataclass
class MLMStepCase(Case):
    """One model at one length: ``impl`` is "longformer" or "transformers"; heads * head_dim is
    the width (longformer_base: 12 x 64 = 768), the feed-forward 4x the width; ``window`` the
    one-sided w (Hugging Face's attention_window is 2w)."""

    layers: int = 12
    heads: int = 12
    head_dim: int = 64
    vocab: int = 50265  # symbols of the dictionary, specials and <mask> included (RoBERTa's)
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    seed: int = 0
    checkpoint_activations: bool = False  # fairseq's --checkpoint-activations (longformer-bench train-steps)

    def make_runner(self) -> "MLMStepRunner":
        return MLMStepRunner(self)


def import_models() -> None:
    """Import the plugin (its registries) and transformers' Longformer here, once: the workers
    forked from this process then share them instead of importing them each (seconds apiece).
    An ImportError that says how to install transformers when it is missing."""
    import fairseq_longformer  # noqa: F401  (registers the longformer architectures and criterion)

    try:
        from transformers import LongformerForMaskedLM  # noqa: F401
    except Exception as error:  # ImportError, or OSError from a broken torchaudio beside it
        raise ImportError("the masked-LM benchmark needs transformers: pip install 'fairseq-longformer[hf]' "
                          f"({type(error).__name__}: {error})") from error


def _dictionary(vocab: int):
    """fairseq's Dictionary of ``vocab`` symbols: its 4 specials, placeholders, <mask> last (as the
    masked-LM task appends it)."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for index in range(vocab - len(dictionary) - 1):
        dictionary.add_symbol(f"w{index}")
    dictionary.add_symbol("<mask>")
    return dictionary


def build_longformer(case: MLMStepCase):
    """(our masked LM in eval mode, its dictionary): ``ARCH`` with the case's sizes and dropout,
    ``case.length`` positions, random weights from ``case.seed``."""
    import fairseq_longformer  # noqa: F401  (registers the longformer architectures)
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    dictionary = _dictionary(case.vocab)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary,
                                 max_positions=lambda: case.length)
    args = argparse.Namespace(
        encoder_layers=case.layers, encoder_embed_dim=case.hidden, encoder_ffn_embed_dim=4 * case.hidden,
        encoder_attention_heads=case.heads, attention_window=str(case.window), max_positions=case.length,
        dropout=case.hidden_dropout, attention_dropout=case.attention_dropout, activation_dropout=0.0,
        checkpoint_activations=case.checkpoint_activations)
    ARCH_CONFIG_REGISTRY[ARCH](args)
    torch.manual_seed(case.seed)
    model = ARCH_MODEL_REGISTRY[ARCH].build_model(args, task)
    return model.eval(), dictionary


def build_model(case: MLMStepCase, impl: Optional[str] = None):
    """(model in eval mode, dictionary) for ``impl`` (default ``case.impl``): ours, or its
    weights in ``LongformerForMaskedLM``."""
    impl = impl or case.impl
    if impl not in MODELS:
        raise ValueError(f"unknown model {impl!r}; expected one of {MODELS}")
    model, dictionary = build_longformer(case)
    if impl == "transformers":
        from fairseq_longformer.conversion import to_hf_masked_lm

        model = to_hf_masked_lm(model, dictionary)
    return model.eval(), dictionary


def mlm_inputs(case: MLMStepCase, length: int, dictionary) -> Dict[str, Tensor]:
    """tokens (B, N) with <mask> at the masked positions, target (B, N): the original token there
    and <pad> elsewhere (fairseq's convention), labels (B, N): the same with -100 (HF's)."""
    gen = torch.Generator().manual_seed(1)
    mask_index = dictionary.index("<mask>")
    original = torch.randint(dictionary.nspecial, mask_index, (case.batch, length), generator=gen)
    original[:, 0], original[:, -1] = dictionary.bos(), dictionary.eos()
    count = max(1, round(MASK_RATE * length))
    masked = torch.zeros(case.batch, length, dtype=torch.bool)
    for row in masked:
        row[torch.randperm(length, generator=gen)[:count]] = True
    return {"tokens": original.masked_fill(masked, mask_index),
            "target": original.masked_fill(~masked, dictionary.pad()),
            "labels": original.masked_fill(~masked, HF_IGNORE)}


def _criterion(dictionary):
    """The plugin's registered ``longformer_mlm`` criterion (summed cross-entropy of the masked
    positions), built for a task of ``dictionary``."""
    from fairseq.criterions import CRITERION_REGISTRY

    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    return CRITERION_REGISTRY["longformer_mlm"](task)


def step_loss(impl: str, model, criterion, inputs: Dict[str, Tensor]) -> Tensor:
    """The masked-LM loss one step backpropagates: ours the criterion's sum over the masked
    positions (fairseq-train's), HF the mean its forward computes from ``labels``."""
    if impl == "longformer":
        sample = {"net_input": {"src_tokens": inputs["tokens"]}, "target": inputs["target"],
                  "ntokens": int(inputs["target"].ne(criterion.padding_idx).sum()),
                  "nsentences": inputs["tokens"].shape[0]}
        return criterion(model, sample)[0]
    return model(input_ids=inputs["tokens"], labels=inputs["labels"]).loss


def all_logits(impl: str, model, tokens: Tensor) -> Tensor:
    """(B, N, V) logits of every position."""
    return model(tokens)[0] if impl == "longformer" else model(input_ids=tokens).logits


class MLMStepRunner(WholeModelRunner):
    """A ``Runner`` (``timed``, ``first_timing``) whose calls run a whole masked LM on tokens."""

    benchmark = "masked-LM step"

    def build(self, case: MLMStepCase):
        model, dictionary = build_model(case)
        self.criterion = _criterion(dictionary)
        return model, dictionary

    def warmup_length(self, case: MLMStepCase) -> int:
        return 2 * case.window  # Hugging Face pads to a multiple of its attention_window

    def set_inputs(self, length: int) -> None:
        self.inputs = mlm_inputs(self.case, length, self.dictionary)

    def fwd(self) -> Tensor:
        """(B, N, V) logits of the eval-mode model, no gradients (inference)."""
        self.module.eval()
        with torch.no_grad():
            return all_logits(self.case.impl, self.module, self.inputs["tokens"])

    def fwd_bwd(self) -> Tensor:
        """One training step's forward, loss and backward (training mode: dropout) into every
        weight; returns the loss."""
        self.module.train()
        for p in self.module.parameters():
            p.grad = None  # as optimizer.zero_grad(set_to_none=True) leaves them
        loss = step_loss(self.case.impl, self.module, self.criterion, self.inputs)
        loss.backward()
        return loss.detach()


def eval_losses(case: MLMStepCase) -> Tuple[float, float, float]:
    """(our loss, transformers' loss, largest |logit difference|), mean nats over the masked
    positions, eval mode, on ``case``'s tokens at its length."""
    torch.set_num_threads(case.threads)
    losses, logits = [], []
    for impl in MODELS:
        model, dictionary = build_model(case, impl)
        inputs = mlm_inputs(case, case.length, dictionary)
        criterion = _criterion(dictionary)
        with torch.no_grad():
            loss = step_loss(impl, model, criterion, inputs)
            logits.append(all_logits(impl, model, inputs["tokens"]))
        masked = int(inputs["target"].ne(dictionary.pad()).sum())
        losses.append(float(loss) / (masked if impl == "longformer" else 1))  # the criterion sums
        del model
    return losses[0], losses[1], float((logits[0] - logits[1]).abs().max())


def loss_check(case: MLMStepCase) -> Tuple[float, float, float]:
    """``eval_losses`` in a forked child (``workers.call_in_fresh_process``)."""
    return call_in_fresh_process(eval_losses, case)


def ratio_rows(results: List[Result]) -> List[dict]:
    """JSON rows of ``results``, each with its tokens per second of steps; ours with its ratios
    against transformers at its length (``ratios.model_vs_baseline_rows``): speedup =
    transformers time / our time (> 1: ours faster; the same as our tokens/s over theirs),
    memory ratio = our peak / their peak (< 1: ours needs less)."""
    rows = model_vs_baseline_rows(results, "longformer", "transformers")
    for row, result in zip(rows, results):
        tokens = result.case.batch * result.case.length
        row["tokens_per_s"] = tokens / (row["fwd_bwd_ms"] / 1e3) if row["fwd_bwd_ms"] else None
    return rows


def _seconds(ms):
    return None if ms is None else ms / 1e3


# the table's columns: heading, width, the cell of a row
COLUMNS = (
    ("N", 6, lambda row: str(row["length"])),
    ("model", 12, lambda row: row["impl"]),
    ("status", 7, lambda row: row["status"]),
    ("step s", 8, lambda row: fmt(_seconds(row["fwd_bwd_ms"]), "{:.2f}")),
    ("tokens/s", 9, lambda row: fmt(row.get("tokens_per_s"))),
    ("speedup", 8, lambda row: fmt(row["ratios"].get("fwd_bwd_speedup"), "{:.2f}")),
    ("fwd s", 7, lambda row: fmt(_seconds(row["fwd_ms"]), "{:.2f}")),
    ("step MB", 8, lambda row: fmt(row["peak_fwd_bwd_mb"])),
    ("mem", 5, lambda row: fmt(row["ratios"].get("fwd_bwd_mem_ratio"), "{:.2f}")),
    ("busy", 5, lambda row: fmt(row["busy_cores_before"], "{:.1f}")),
)


def format_rows(rows: List[dict]) -> str:
    """The table: a line per (length, model), seconds per step, tokens per second and our ratios
    to transformers, then a note per row that is not ok."""
    header = " ".join(f"{heading:>{width}}" for heading, width, _ in COLUMNS)
    lines = ["step = forward + masked-LM loss + backward into every weight (training mode); speedup = "
             "transformers time / longformer time (= longformer tokens/s / transformers tokens/s; > 1: "
             "longformer faster); mem = longformer peak / transformers peak; busy: cores used by other work "
             "just before timing", header, "-" * len(header)]
    for row in sorted(rows, key=lambda r: (r["length"], MODELS.index(r["impl"]))):
        lines.append(" ".join(f"{cell(row):>{width}}" for _, width, cell in COLUMNS))
    return "\n".join(lines + [f"{r['impl']} N={r['length']}: {r['status']}: {r['note']}"
                              for r in rows if r["status"] != "ok"])
