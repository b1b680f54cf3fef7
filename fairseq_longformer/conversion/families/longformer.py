"""The Longformer family: fairseq's Longformer (masked-LM, classification, QA heads) <-> HF
``LongformerFor*`` (and RoBERTa-family folders on import): key map, config, tensors both ways.
HF's token_type row 0 is folded into the positions on import (a zero row on export); tied, the HF
decoder weight is not written. Shapes: V vocabulary, C hidden, F ffn, P position rows, L outputs."""
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

from ...models.global_projections import add_missing_global_projections
from ...tasks.longformer_mlm import batch_pad_multiple
from ..rules import (
    UNCHECKED, extend_positions, filled_from, from_hf_windows, renamed, rule_problems, shape_of, table_keys,
    to_hf_windows,
)
from .longformer_heads import HEAD_MODULES, HEAD_TASKS, HeadRef, head_config

logger = logging.getLogger(__name__)

# The key table, one row per module: fairseq module, HF module, weight shape, bias shape (None: no
# such tensor), when it applies ("all"; "global": HF Longformer only; "lm": the masked-LM head;
# "untied": the LM head's own output projection, when not tied to the token embeddings).
FS_ENCODER = "encoder.sentence_encoder."
FS_LAYER = FS_ENCODER + "layers.{i}."
HF_LAYER = "{base}.encoder.layer.{i}."
_CC, _FC, _CF, _C, _F = ("C", "C"), ("F", "C"), ("C", "F"), ("C",), ("F",)

MODULE_TABLE: Tuple[Tuple[str, str, Optional[Tuple[str, ...]], Optional[Tuple[str, ...]], str], ...] = (
    (FS_ENCODER + "embed_tokens", "{base}.embeddings.word_embeddings", ("V", "C"), None, "all"),
    (FS_ENCODER + "embed_positions", "{base}.embeddings.position_embeddings", ("P", "C"), None, "all"),
    (FS_ENCODER + "layernorm_embedding", "{base}.embeddings.LayerNorm", _C, _C, "all"),
    (FS_LAYER + "self_attn.q_proj", HF_LAYER + "attention.self.query", _CC, _C, "all"),
    (FS_LAYER + "self_attn.k_proj", HF_LAYER + "attention.self.key", _CC, _C, "all"),
    (FS_LAYER + "self_attn.v_proj", HF_LAYER + "attention.self.value", _CC, _C, "all"),
    (FS_LAYER + "self_attn.q_global_proj", HF_LAYER + "attention.self.query_global", _CC, _C, "global"),
    (FS_LAYER + "self_attn.k_global_proj", HF_LAYER + "attention.self.key_global", _CC, _C, "global"),
    (FS_LAYER + "self_attn.v_global_proj", HF_LAYER + "attention.self.value_global", _CC, _C, "global"),
    (FS_LAYER + "self_attn.out_proj", HF_LAYER + "attention.output.dense", _CC, _C, "all"),
    (FS_LAYER + "self_attn_layer_norm", HF_LAYER + "attention.output.LayerNorm", _C, _C, "all"),
    (FS_LAYER + "fc1", HF_LAYER + "intermediate.dense", _FC, _F, "all"),
    (FS_LAYER + "fc2", HF_LAYER + "output.dense", _CF, _C, "all"),
    (FS_LAYER + "final_layer_norm", HF_LAYER + "output.LayerNorm", _C, _C, "all"),
    ("encoder.lm_head.dense", "lm_head.dense", _CC, _C, "lm"),
    ("encoder.lm_head.layer_norm", "lm_head.layer_norm", _C, _C, "lm"),
    ("encoder.lm_head", "lm_head", None, ("V",), "lm"),
    ("encoder.lm_head", "lm_head.decoder", ("V", "C"), None, "untied"),
)
# HF tensors with no fairseq counterpart, handled explicitly (see the module docstring).
HF_TOKEN_TYPE = "{base}.embeddings.token_type_embeddings.weight"
HF_DECODER_BIAS = "lm_head.decoder.bias"  # HF's alias of lm_head.bias
HF_DECODER_WEIGHT = "lm_head.decoder.weight"
HF_IGNORED_BUFFERS = ("{base}.embeddings.position_ids", "{base}.embeddings.token_type_ids")
FAIRSEQ_TIED_HEAD = "encoder.lm_head.weight"
FAIRSEQ_TOKENS = FS_ENCODER + "embed_tokens.weight"
FAIRSEQ_POSITIONS = FS_ENCODER + "embed_positions.weight"
# The task heads, as MODULE_TABLE but with the head kind first ({name}: the head's name).
HEAD_TABLE: Tuple[Tuple[str, str, str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("classification", "classification_heads.{name}.dense", "classifier.dense", _CC, _C),
    ("classification", "classification_heads.{name}.out_proj", "classifier.out_proj", ("L", "C"), ("L",)),
    ("span", "span_heads.{name}.qa_outputs", "qa_outputs", ("L", "C"), ("L",)),
)
# The HF class of each export (head kind; None: the masked LM), and the prefix of its head's tensors.
HF_ARCHITECTURES = {None: "LongformerForMaskedLM", "classification": "LongformerForSequenceClassification",
                    "span": "LongformerForQuestionAnswering"}
HF_HEAD_PREFIXES = {None: "lm_head.", "classification": "classifier.", "span": "qa_outputs."}

HF_BASE = {"longformer": "longformer", "roberta": "roberta"}  # source family -> base-model prefix
# RoBERTa's family: transformers models with RoBERTa's modules under the same "roberta." names
# (XLM-R, CamemBERT: fairseq-trained RoBERTas with a sentencepiece vocabulary), imported as
# "roberta"; another model_type is taken when config.json's architectures names one of these
# classes. BERT is not one: positions without fairseq's offset, segment embeddings, [CLS]/[SEP]
# ids and layer-norm eps 1e-12 have no counterpart in fairseq's Longformer.
ROBERTA_MODEL_TYPES = ("roberta", "xlm-roberta", "camembert")
ROBERTA_SHAPED = tuple(f"{prefix}For{head}" for prefix in ("Roberta", "XLMRoberta", "Camembert")
                       for head in ("MaskedLM", "SequenceClassification", "QuestionAnswering"))


def source_family(config: Mapping) -> Optional[str]:
    """"longformer" or "roberta" (the key of HF_BASE) for a folder's config.json, None if neither."""
    model_type = config.get("model_type")
    if model_type == "longformer":
        return "longformer"
    architectures = config.get("architectures") or []
    if model_type in ROBERTA_MODEL_TYPES or (isinstance(architectures, list)
                                             and any(a in ROBERTA_SHAPED for a in architectures)):
        return "roberta"
    return None


FAIRSEQ_LAYERNORM_EPS = 1e-5  # fairseq's LayerNorm default; no flag changes it
WEIGHTS_NAME = "model.safetensors"


def key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
            tied: bool = True, head: Optional[HeadRef] = None) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """fairseq key -> (HF key, symbolic shape) for every tensor the tables cover: the body, then
    the LM head (``head`` None) or the task head ``head``."""
    wanted = {"all", *(["global"] if global_projections else []), *(["lm"] if head is None else []),
              *(["untied"] if head is None and not tied else [])}
    rows = [row[:4] for row in MODULE_TABLE if row[4] in wanted]
    rows += [row[1:] for row in HEAD_TABLE if head is not None and row[0] == head.kind]
    return table_keys(rows, {"i": num_layers}, base=base, name=head.name if head else "")


def reverse_key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
                    tied: bool = True, head: Optional[HeadRef] = None) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """HF key -> (fairseq key, symbolic shape): the inverse of ``key_map``, never written by hand."""
    return {hf: (fs, shape) for fs, (hf, shape) in key_map(num_layers, base, global_projections, tied, head).items()}


@dataclass
class ExportLayout:
    """Everything the HF config needs, read from the built fairseq model (not from flags)."""

    num_layers: int
    num_heads: int
    hidden: int
    ffn: int
    vocab: int
    position_rows: int
    padding_idx: int
    windows: Tuple[int, ...]  # one-sided w per layer
    layer_norm_eps: float
    dropout: float
    attention_dropout: float
    tied: bool
    head: Optional[HeadRef] = None  # the task head exported; None: the LM head (a masked LM)
    outputs: int = 0  # L: the task head's outputs
    warnings: List[str] = field(default_factory=list)

    @property
    def max_positions(self) -> int:
        return self.position_rows - self.padding_idx - 1

    def dims(self) -> Dict[str, int]:
        return {"V": self.vocab, "C": self.hidden, "F": self.ffn, "P": self.position_rows, "L": self.outputs}

    def hf_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """HF key -> shape of every tensor the export writes."""
        dims = self.dims()
        shapes = {hf: shape_of(spec, dims) for hf, (_, spec) in
                  reverse_key_map(self.num_layers, "longformer", True, self.tied, self.head).items()}
        shapes[HF_TOKEN_TYPE.format(base="longformer")] = (1, self.hidden)
        if self.head is None:
            shapes[HF_DECODER_BIAS] = (self.vocab,)
        return shapes


def hf_config_dict(layout: ExportLayout, dictionary, labels: Optional[List[str]] = None) -> Dict[str, object]:
    """The LongformerConfig fields export writes, each from the built model or its dictionary (a
    classification head's labels: ``labels``, the task's label dictionary after its specials)."""
    return {
        "architectures": [HF_ARCHITECTURES[layout.head and layout.head.kind]],
        "vocab_size": layout.vocab,  # rows of embed_tokens == len(dictionary) incl. <mask>
        "hidden_size": layout.hidden,  # embed_tokens.weight.shape[1] (--encoder-embed-dim)
        "num_hidden_layers": layout.num_layers,  # len(encoder.layers) (--encoder-layers)
        "num_attention_heads": layout.num_heads,  # self_attn.num_heads (--encoder-attention-heads)
        "intermediate_size": layout.ffn,  # fc1.out_features (--encoder-ffn-embed-dim)
        "hidden_act": "gelu",  # checked: fairseq's activation is exact GELU
        "hidden_dropout_prob": layout.dropout,  # dropout_module.p (--dropout)
        "attention_probs_dropout_prob": layout.attention_dropout,  # self_attn.config.dropout (--attention-dropout)
        "max_position_embeddings": layout.position_rows,  # embed_positions rows = tokens + pad + 1
        "type_vocab_size": 1,  # one all-zero row (fairseq has no segment embeddings)
        "initializer_range": 0.02,  # fairseq's init_bert_params std (used only to init new heads)
        "layer_norm_eps": layout.layer_norm_eps,  # LayerNorm.eps of every norm (checked equal)
        "pad_token_id": dictionary.pad(),
        "bos_token_id": dictionary.bos(),
        "eos_token_id": dictionary.eos(),
        "sep_token_id": dictionary.eos(),  # RoBERTa separates segments with </s>
        "attention_window": to_hf_windows(layout.windows),  # TWO-sided, per layer
        "tie_word_embeddings": layout.tied,  # lm_head.weight is embed_tokens.weight
        **head_config(layout.head, layout.outputs, labels),
    }


def _left_out(key: str, mapping: Mapping, layout: ExportLayout) -> bool:
    """fairseq tensors an export leaves out on purpose: version counters, heads other than the one
    exported, and the LM head when a task head is exported."""
    other_head = key.split(".")[0] in HEAD_MODULES.values() and key not in mapping
    return key.endswith(".version") or other_head or (layout.head is not None and key.startswith("encoder.lm_head."))


def fairseq_to_hf_state(state: Mapping[str, Tensor], layout: ExportLayout) -> Dict[str, Tensor]:
    """fairseq state dict -> the tensors of model.safetensors (keys here, shapes by the caller)."""
    mapping = key_map(layout.num_layers, "longformer", global_projections=True, tied=layout.tied, head=layout.head)
    state = {k: v for k, v in state.items() if not _left_out(k, mapping, layout)}
    if layout.tied and layout.head is None:
        assert torch.equal(state[FAIRSEQ_TIED_HEAD], state[FAIRSEQ_TOKENS]), "tied LM head differs from embeddings"
        state.pop(FAIRSEQ_TIED_HEAD)
    out = renamed(state, {fs: hf for fs, (hf, _) in mapping.items()}, "fairseq state dict does not match the key map")
    out = {hf: value.detach().to("cpu", torch.float32).contiguous().clone() for hf, value in out.items()}
    # No fairseq counterpart: one zero row adds nothing to any embedding.
    out[HF_TOKEN_TYPE.format(base="longformer")] = torch.zeros(1, layout.hidden)
    if layout.head is None:  # HF's alias of lm_head.bias (tied in HF): written so every HF version finds it.
        out[HF_DECODER_BIAS] = out["lm_head.bias"].clone()
    return out


def hf_to_fairseq_state(state: Mapping[str, Tensor], template: Mapping[str, Tensor], forward: Mapping,
                        token_type_key: str, max_positions: int, copy_global: bool, tied: bool,
                        warnings: List[str]) -> Dict[str, Tensor]:
    """HF tensors (keys and shapes already checked) -> the state dict of the built fairseq model
    ``template``: the key map ``forward`` applied, token type row 0 folded into the positions
    (every token gets exactly one position row, so the sum is unchanged), positions extended,
    global projections copied from Q, K, V when the source has none (``copy_global``: a RoBERTa;
    the paper's init), the LM head re-tied; what the map does not fill (version counters, a head
    model's LM head) is the builder's."""
    new: Dict[str, Tensor] = {fs: state[hf].to(torch.float32).clone() for fs, (hf, _) in forward.items()}
    positions = new[FAIRSEQ_POSITIONS]
    token_types = state[token_type_key].to(torch.float32)
    if token_types.shape[0] > 1:
        warnings.append(f"token_type_embeddings rows 1..{token_types.shape[0] - 1} dropped: fairseq's RoBERTa has "
                        "no segment ids (row 0, the one every token gets by default, is kept)")
    if bool(token_types[0].ne(0).any()):
        positions = positions + token_types[0]
        logger.info("token_type_embeddings row 0 is not zero: folded into the positions")
    new[FAIRSEQ_POSITIONS] = extend_positions(positions, max_positions, padding_idx=1, init="copy")
    if copy_global:
        add_missing_global_projections(new)
    if tied:
        new[FAIRSEQ_TIED_HEAD] = new[FAIRSEQ_TOKENS]
    return filled_from(new, template, lambda key: key.endswith(".version") or key.startswith("encoder.lm_head."),
                       "imported fairseq state")


# config.json entry -> the HF tensor (base-model prefix "{base}") and dimension that hold the same
# number: checked against the tensors before anything is sized by the config.
HF_SIZES = {
    "vocab_size": ("{base}.embeddings.word_embeddings.weight", 0),
    "hidden_size": ("{base}.embeddings.word_embeddings.weight", 1),
    "max_position_embeddings": ("{base}.embeddings.position_embeddings.weight", 0),
    "intermediate_size": ("{base}.encoder.layer.0.intermediate.dense.weight", 0),
}
HF_LAYER_COUNTS = {"num_hidden_layers": "{base}.encoder.layer."}


FAIRSEQ_IDS = (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2))  # fixed by fairseq's Dictionary
CONFIG_RULES = (  # (config.json entry, default, ok, why); only the entries config.json has are checked
    ("hidden_act", UNCHECKED, lambda v: v == "gelu", "fairseq's Longformer is exported/imported with exact GELU only"),
    ("layer_norm_eps", UNCHECKED, lambda v: abs(float(v) - FAIRSEQ_LAYERNORM_EPS) <= 1e-12,
     f"fairseq's layer norms use eps {FAIRSEQ_LAYERNORM_EPS} (no flag changes it)"),
    ("position_embedding_type", UNCHECKED, lambda v: v in (None, "absolute"),
     "only absolute (learned) positions have a fairseq counterpart"),
    ("is_decoder", UNCHECKED, lambda v: not v, "a decoder (causal) model is not a masked LM encoder"),
    ("add_cross_attention", UNCHECKED, lambda v: not v, "cross-attention has no counterpart in the encoder"),
    ("problem_type", UNCHECKED, lambda v: v in (None, "single_label_classification"),
     "fairseq's longformer_classification trains single-label cross-entropy"),
)


def config_problems(config: Mapping, model_type: str) -> List[str]:
    """What in a HF config.json fairseq's Longformer cannot take, one line each (no size is read)."""
    # CamemBERT's released config says bos 5, eos 6: its tokenizer's <s>, </s>, with fairseq's ids 0
    # and 2 kept as <s>NOTUSED, </s>NOTUSED (checked, with a warning, against the tokenizer on import)
    ids = FAIRSEQ_IDS[:1] if config.get("model_type") == "camembert" else FAIRSEQ_IDS
    return rule_problems(config, CONFIG_RULES + tuple(
        (name, UNCHECKED, lambda v, i=i: v is None or v == i, f"fairseq's Dictionary fixes this id to {i}")
        for name, i in ids))


def size_problems(config: Mapping, model_type: str) -> List[str]:
    """What in a HF config.json, its sizes checked against the tensors, fairseq's Longformer
    cannot take: heads that do not divide the width, windows that are not one per layer."""
    problems: List[str] = []
    heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
    if heads < 1 or hidden % heads:
        problems.append(f"num_attention_heads = {heads} does not divide hidden_size {hidden}")
    if model_type == "longformer":
        _, problem = from_hf_windows(config.get("attention_window"), int(config["num_hidden_layers"]))
        if problem:
            problems.append(problem)
    return problems


def fairseq_args(data: Path, layers, hidden, ffn, heads, windows, max_positions, dropout, attention_dropout,
                  untied, head: Optional[HeadRef] = None):
    """fairseq's parsed training args for the Longformer these sizes describe (its head's task)."""
    from fairseq import options

    if head is None:
        task = ["--task", "longformer_mlm", "--criterion", "longformer_mlm", "--tokens-per-sample", str(max_positions)]
    else:  # HF's classifier drops out with hidden_dropout_prob
        task = HEAD_TASKS[head.kind].flags(head.name) + ["--pooler-dropout", repr(float(dropout))]
    flags = [str(data), *task, "--arch", "longformer",
             "--encoder-layers", str(layers), "--encoder-embed-dim", str(hidden),
             "--encoder-ffn-embed-dim", str(ffn), "--encoder-attention-heads", str(heads),
             "--attention-window", ",".join(map(str, windows)), "--attention-dilation", "1",
             "--max-positions", str(max_positions),
             "--pad-to-multiple", str(batch_pad_multiple(windows, max_positions)), "--activation-fn", "gelu",
             "--dropout", repr(float(dropout)), "--attention-dropout", repr(float(attention_dropout)),
             "--activation-dropout", "0"]
    if untied:
        flags.append("--untie-weights-roberta")
    parser = options.get_training_parser(default_task="longformer_mlm")
    return options.parse_args_and_arch(parser, input_args=flags)

