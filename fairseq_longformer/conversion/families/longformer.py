"""fairseq's Longformer (masked LM, classification, QA) <-> HF ``LongformerFor*`` (RoBERTa family on import), and
the task head an export carries (heads no transformers class computes are refused).
Shapes: V vocabulary, C hidden, F ffn, P position rows, L outputs."""
import logging
from dataclasses import dataclass, field, fields
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ...models.global_projections import add_missing_global_projections
from ..rules import QKV, UNCHECKED, check_shapes, extend_positions, is_exact_gelu, renamed, rule_problems, \
    shape_of, stack_problems, table_keys, window_problems

logger = logging.getLogger(__name__)
HEAD_MODULES = {"classification": "classification_heads", "span": "span_heads"}  # kind -> ModuleDict
# The key table: fairseq module, HF module, weight shape, bias shape (None: no such tensor), when it
# applies ("global": HF Longformer only; "lm": the LM head; "untied": its own output projection).
FS_ENCODER = "encoder.sentence_encoder."
FS_LAYER = FS_ENCODER + "layers.{i}."
HF_LAYER = "{base}.encoder.layer.{i}."
_CC, _FC, _CF, _C, _F = ("C", "C"), ("F", "C"), ("C", "F"), ("C",), ("F",)
MODULE_TABLE = (
    (FS_ENCODER + "embed_tokens", "{base}.embeddings.word_embeddings", ("V", "C"), None, "all"),
    (FS_ENCODER + "embed_positions", "{base}.embeddings.position_embeddings", ("P", "C"), None, "all"),
    (FS_ENCODER + "layernorm_embedding", "{base}.embeddings.LayerNorm", _C, _C, "all"),
    *((FS_LAYER + f"self_attn.{fs}{kind}_proj", HF_LAYER + f"attention.self.{hf}{kind}", _CC, _C, when)
      for kind, when in (("", "all"), ("_global", "global")) for fs, hf in QKV),
    (FS_LAYER + "self_attn.out_proj", HF_LAYER + "attention.output.dense", _CC, _C, "all"),
    (FS_LAYER + "self_attn_layer_norm", HF_LAYER + "attention.output.LayerNorm", _C, _C, "all"),
    (FS_LAYER + "fc1", HF_LAYER + "intermediate.dense", _FC, _F, "all"),
    (FS_LAYER + "fc2", HF_LAYER + "output.dense", _CF, _C, "all"),
    (FS_LAYER + "final_layer_norm", HF_LAYER + "output.LayerNorm", _C, _C, "all"),
    ("encoder.lm_head.dense", "lm_head.dense", _CC, _C, "lm"),
    ("encoder.lm_head.layer_norm", "lm_head.layer_norm", _C, _C, "lm"),
    ("encoder.lm_head", "lm_head", None, ("V",), "lm"),
    ("encoder.lm_head", "lm_head.decoder", ("V", "C"), None, "untied"))
HEAD_TABLE = (  # as MODULE_TABLE, the head kind first ({name}: the head's name)
    ("classification", "classification_heads.{name}.dense", "classifier.dense", _CC, _C),
    ("classification", "classification_heads.{name}.out_proj", "classifier.out_proj", ("L", "C"), ("L",)),
    ("span", "span_heads.{name}.qa_outputs", "qa_outputs", ("L", "C"), ("L",)))
# HF tensors with no fairseq counterpart
HF_TOKEN_TYPE = "{base}.embeddings.token_type_embeddings.weight"
HF_DECODER_BIAS = "lm_head.decoder.bias"  # HF's alias of lm_head.bias
HF_DECODER_WEIGHT = "lm_head.decoder.weight"
HF_IGNORED_BUFFERS = ("{base}.embeddings.position_ids", "{base}.embeddings.token_type_ids")
FAIRSEQ_TIED_HEAD = "encoder.lm_head.weight"
FAIRSEQ_TOKENS = FS_ENCODER + "embed_tokens.weight"
FAIRSEQ_POSITIONS = FS_ENCODER + "embed_positions.weight"
HF_ARCHITECTURES = {None: "LongformerForMaskedLM", "classification": "LongformerForSequenceClassification",
                    "span": "LongformerForQuestionAnswering"}
HF_HEAD_PREFIXES = {None: "lm_head.", "classification": "classifier.", "span": "qa_outputs."}
HF_BASE = {"longformer": "longformer", "roberta": "roberta"}  # source family -> base-model prefix
# RoBERTa's family: RoBERTa's modules under "roberta." (XLM-R, CamemBERT: fairseq-trained RoBERTas
# with a sentencepiece vocabulary). Not BERT: positions without fairseq's offset, segment embeddings,
# [CLS]/[SEP] ids and layer-norm eps 1e-12 have no counterpart in fairseq's Longformer.
ROBERTA_MODEL_TYPES = ("roberta", "xlm-roberta", "camembert")
ROBERTA_SHAPED = tuple(f"{prefix}For{head}" for prefix in ("Roberta", "XLMRoberta", "Camembert")
                       for head in ("MaskedLM", "SequenceClassification", "QuestionAnswering"))
# ExportLayout field -> its config.json entry: the export writes them, the import reads the sizes (first 6) back
HF_CONFIG = {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "hidden": "hidden_size",
             "ffn": "intermediate_size", "vocab": "vocab_size", "position_rows": "max_position_embeddings",
             "dropout": "hidden_dropout_prob", "attention_dropout": "attention_probs_dropout_prob",
             "layer_norm_eps": "layer_norm_eps", "tied": "tie_word_embeddings"}
FAIRSEQ_LAYERNORM_EPS = 1e-5  # fairseq's LayerNorm default; no flag changes it
WEIGHTS_NAME = "model.safetensors"
# config.json entry -> the HF tensor and dimension holding the same number (checked before sizing anything)
HF_SIZES = {
    "vocab_size": ("{base}.embeddings.word_embeddings.weight", 0),
    "hidden_size": ("{base}.embeddings.word_embeddings.weight", 1),
    "max_position_embeddings": ("{base}.embeddings.position_embeddings.weight", 0),
    "intermediate_size": ("{base}.encoder.layer.0.intermediate.dense.weight", 0)}
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
     "fairseq's longformer_classification trains single-label cross-entropy"))


class HeadRef(NamedTuple):
    kind: str
    name: str


@dataclass(frozen=True)
class HeadTask:
    task: str
    name_field: str
    token_dict: str
    label_dict: Optional[str] = None

    @property
    def default_name(self) -> str:
        from fairseq.tasks import TASK_DATACLASS_REGISTRY
        return {f.name: f.default for f in fields(TASK_DATACLASS_REGISTRY[self.task])}[self.name_field]

    def flags(self, name: str) -> List[str]:  # the criterion has the task's name
        return ["--task", self.task, "--criterion", self.task, "--" + self.name_field.replace("_", "-"), name]


HEAD_TASKS = {"classification": HeadTask("longformer_classification", "classification_head_name", "input0/dict.txt",
                                          "label/dict.txt"),
              "span": HeadTask("longformer_qa", "span_head_name", "dict.txt")}
MLM_TOKEN_DICT = "dict.txt"  # longformer_mlm reads DATA/dict.txt
HOTPOTQA_HEAD = ("a HotpotQA head (task longformer_hotpotqa: answer span, question type, supporting paragraphs "
                 "and sentences)")
NO_HF_CLASS = {  # a tensor only that head holds -> what it is (span heads told apart by their layers' names)
    "question_type.out_proj.weight": HOTPOTQA_HEAD,
    "question_type.weight": HOTPOTQA_HEAD,  # checkpoints from before its type head had two layers
    "candidate_score.weight": "a WikiHop candidate head (task longformer_wikihop: one logit per [ent] token)",
    "mention_ffnn.0.weight": "a coreference head (task longformer_coref: the coarse-to-fine span and antecedent "
                             "scorer)"}


def model_heads(model) -> List[HeadRef]:
    return [HeadRef(kind, name) for kind, attr in HEAD_MODULES.items() for name in getattr(model, attr, {})]


def choose_head(heads: Sequence[HeadRef], name: Optional[str], where: str) -> Optional[HeadRef]:
    """The head to export: the one named, else the only one, else None (a masked LM)."""
    listing = ", ".join(f"{h.name!r} ({h.kind})" for h in heads) or "none"
    if name is None:
        if len(heads) > 1:
            raise ValueError(f"{where} has {len(heads)} heads ({listing}) and a Hugging Face model carries "
                             "one: choose it with --head-name NAME")
        return heads[0] if heads else None
    named = [h for h in heads if h.name == name]
    if len(named) != 1:
        raise ValueError(f"--head-name {name!r}: {where} has {'several heads' if named else 'no head'} of that "
                         f"name; its heads: {listing}")
    return named[0]


def refuse_heads_without_hf_class(head: Optional[HeadRef], tensor_names) -> None:
    """ValueError (one line) when ``head``, holding ``tensor_names``, is a head no transformers class computes."""
    for name, what in NO_HF_CLASS.items() if head is not None and head.kind == "span" else ():
        if name in tensor_names:
            raise ValueError(f"head {head.name!r} is {what}, which no transformers class computes: nothing written; "
                             "export the encoder alone with --encoder-only (LongformerForMaskedLM, whose encoder "
                             "LongformerModel.from_pretrained loads)")


def head_module(model, head: HeadRef) -> nn.Module:
    return getattr(model, HEAD_MODULES[head.kind])[head.name]


def register_head(model, head: HeadRef, outputs: int, inner_dim: Optional[int] = None) -> None:
    """Add ``head`` with fresh weights through the model's own registration (as the tasks do)."""
    if head.kind == "classification":
        model.register_classification_head(head.name, num_classes=outputs, inner_dim=inner_dim)
    else:
        model.register_span_head(head.name)  # always C -> 2


def source_family(config: Mapping) -> Optional[str]:
    """"longformer" or "roberta" (a key of HF_BASE) for a folder's config.json, None if neither."""
    if config.get("model_type") == "longformer":
        return "longformer"
    architectures = config.get("architectures") or []
    if config.get("model_type") in ROBERTA_MODEL_TYPES or (isinstance(architectures, list)
                                                           and any(a in ROBERTA_SHAPED for a in architectures)):
        return "roberta"
    return None


def key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
            tied: bool = True, head: Optional[HeadRef] = None) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """fairseq key -> (HF key, symbolic shape): the body, then the LM head (``head`` None) or ``head``."""
    wanted = {"all", *(["global"] if global_projections else []), *(["lm"] if head is None else []),
              *(["untied"] if head is None and not tied else [])}
    rows = [row[:4] for row in MODULE_TABLE if row[4] in wanted]
    rows += [row[1:] for row in HEAD_TABLE if head is not None and row[0] == head.kind]
    return table_keys(rows, {"i": num_layers}, base=base, name=head.name if head else "")


def reverse_key_map(*args, **kwargs) -> Dict[str, Tuple[str, Tuple[str, ...]]]:  # HF key -> (fairseq key, shape)
    return {hf: (fs, shape) for fs, (hf, shape) in key_map(*args, **kwargs).items()}


@dataclass
class ExportLayout:
    """What the HF config needs, read from the built fairseq model (not from flags); windows one-sided."""
    num_layers: int
    num_heads: int
    hidden: int
    ffn: int
    vocab: int
    position_rows: int
    padding_idx: int
    windows: Tuple[int, ...]
    layer_norm_eps: float
    dropout: float
    attention_dropout: float
    tied: bool
    head: Optional[HeadRef] = None  # None: the LM head (a masked LM)
    outputs: int = 0  # L: the task head's outputs
    warnings: List[str] = field(default_factory=list)

    def hf_config(self, labels: Optional[List[str]] = None) -> Dict[str, object]:
        """The LongformerConfig fields (``labels``: a classification head's class names, else LABEL_k)."""
        config = {"architectures": [HF_ARCHITECTURES[self.head and self.head.kind]], "hidden_act": "gelu",
                  **{hf: getattr(self, name) for name, hf in HF_CONFIG.items()}, "initializer_range": 0.02,
                  "type_vocab_size": 1,  # one all-zero row (fairseq has no segment embeddings)
                  **dict(FAIRSEQ_IDS), "sep_token_id": 2,  # the import's ids; RoBERTa separates segments with </s>
                  "attention_window": [2 * w for w in self.windows]}
        if self.head is None or self.head.kind == "span":
            return {**config, **({"num_labels": self.outputs} if self.head else {})}
        names = list(labels) if labels is not None else [f"LABEL_{k}" for k in range(self.outputs)]
        if len(names) != self.outputs:
            raise ValueError(f"the label dictionary has {len(names)} labels but classification head "
                             f"{self.head.name!r} has {self.outputs} outputs: pass the label/dict.txt the model was "
                             "trained with (--label-dict)")
        return {**config, "id2label": dict(enumerate(names)), "label2id": {n: k for k, n in enumerate(names)},
                "problem_type": "single_label_classification"}

    def hf_state(self, state: Mapping[str, Tensor]) -> Dict[str, Tensor]:
        """fairseq state dict -> model.safetensors' tensors (not: versions, other heads, a head export's LM head)."""
        mapping = key_map(self.num_layers, tied=self.tied, head=self.head)
        state = {k: v for k, v in state.items() if not (
            k.endswith(".version") or (k.split(".")[0] in HEAD_MODULES.values() and k not in mapping)
            or (self.head is not None and k.startswith("encoder.lm_head.")))}
        if self.tied and self.head is None:
            assert torch.equal(state[FAIRSEQ_TIED_HEAD], state[FAIRSEQ_TOKENS]), "tied LM head differs from embeddings"
            state.pop(FAIRSEQ_TIED_HEAD)
        out = renamed(state, {fs: hf for fs, (hf, _) in mapping.items()},
                      "fairseq state dict does not match the key map")
        out = {hf: value.detach().to("cpu", torch.float32).contiguous().clone() for hf, value in out.items()}
        out[HF_TOKEN_TYPE.format(base="longformer")] = torch.zeros(1, self.hidden)  # adds nothing to any embedding
        if self.head is None:  # HF's alias of lm_head.bias: written so every HF version finds it
            out[HF_DECODER_BIAS] = out["lm_head.bias"].clone()
        dims = {"V": self.vocab, "C": self.hidden, "F": self.ffn, "P": self.position_rows, "L": self.outputs}
        check_shapes(out, {**{hf: shape_of(spec, dims) for hf, spec in mapping.values()},
                           HF_TOKEN_TYPE.format(base="longformer"): (1, self.hidden),
                           **({HF_DECODER_BIAS: (self.vocab,)} if self.head is None else {})}, "exported tensors")
        return out


def hf_to_fairseq_state(state: Mapping[str, Tensor], forward: Mapping, token_type_key: str, max_positions: int,
                        copy_global: bool, tied: bool, warnings: List[str]) -> Dict[str, Tensor]:
    """Checked HF tensors -> fairseq's: token type row 0 folded into the positions (every token gets one of each:
    the sum is unchanged), positions extended, global Q/K/V = Q/K/V (``copy_global``)."""
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
    return new


def config_problems(config: Mapping) -> List[str]:
    """What in a HF config.json fairseq's Longformer cannot take, one line each (no size is read)."""
    # CamemBERT's bos 5, eos 6: fairseq's 0 and 2 kept as <s>NOTUSED, </s>NOTUSED (checked on import)
    ids = FAIRSEQ_IDS[:1] if config.get("model_type") == "camembert" else FAIRSEQ_IDS
    return rule_problems(config, CONFIG_RULES + tuple(
        (name, UNCHECKED, lambda v, i=i: v is None or v == i, f"fairseq's Dictionary fixes this id to {i}")
        for name, i in ids))


def inspect_model(model, dictionary, head: Optional[HeadRef] = None) -> ExportLayout:
    """The layout of a built fairseq Longformer with ``head`` (None: LM head); ValueError naming all HF cannot hold."""
    from ...models.longformer import LongformerModel
    from ...modules.self_attention import LongformerSelfAttention
    if not isinstance(model, LongformerModel):
        raise ValueError(f"expected a fairseq Longformer (model 'longformer'), got {type(model).__name__}: "
                         "convert a RoBERTa checkpoint with longformer-convert-roberta first")
    encoder = model.encoder.sentence_encoder
    layers = list(encoder.layers)
    windows = [layer.self_attn.config.pattern.window for layer in layers
               if isinstance(layer.self_attn, LongformerSelfAttention)]
    problems = window_problems(windows) + stack_problems("encoder", encoder, "HF Longformer")
    if encoder.quant_noise is not None or getattr(layers[0] if layers else None, "quant_noise", 0):
        problems.append("--quant-noise-pq: quantization noise has no HF equivalent")
    lm_head, hidden = model.encoder.lm_head, encoder.embed_tokens.weight.shape[1]
    dropout = float(layers[0].dropout_module.p)
    outputs, head_warnings, module = 0, [], head_module(model, head) if head is not None else None
    if head is not None and head.kind != "classification":  # a span head is exactly HF's qa_outputs
        outputs = module.qa_outputs.out_features
    elif head is not None:
        outputs = module.out_proj.out_features
        if module.dense.out_features != hidden:
            problems.append(f"classification head {head.name!r}: inner dimension {module.dense.out_features}; HF's "
                            f"classifier.dense is hidden x hidden ({hidden})")
        if module.activation_fn is not torch.tanh:
            problems.append(f"--pooler-activation-fn: classification head {head.name!r} uses "
                            f"{getattr(module.activation_fn, '__name__', module.activation_fn)}; HF's classifier "
                            "hard-codes tanh")
        if hasattr(module.out_proj, "weight_orig"):
            problems.append("--spectral-norm-classification-head: HF's classifier.out_proj is a plain Linear")
        if module.dropout.p != dropout:
            head_warnings.append(f"--pooler-dropout {module.dropout.p} is not exported: HF's classifier applies "
                                 f"hidden_dropout_prob ({dropout}) (training only; outputs in eval mode are "
                                 "unaffected)")
    if head is None and not is_exact_gelu(lm_head.activation_fn):
        problems.append(f"--activation-fn: the LM head uses {getattr(lm_head.activation_fn, '__name__', '?')}; "
                        "HF's Longformer LM head hard-codes exact GELU")
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    eps = sorted({float(m.eps) for m in norms})
    if len(eps) > 1:
        problems.append(f"layer norms use different epsilons {eps}; HF has one layer_norm_eps")
    vocab = encoder.embed_tokens.weight.shape[0]
    if len(dictionary) != vocab:
        problems.append(f"the dictionary has {len(dictionary)} symbols (with <mask>) but the embeddings have "
                        f"{vocab} rows: pass the dict.txt the model was trained with (--dict)")
    position_pad = getattr(encoder.embed_positions, "padding_idx", dictionary.pad())
    if position_pad != dictionary.pad():
        problems.append(f"the position table's padding_idx {position_pad} is not the "
                        f"dictionary's <pad> {dictionary.pad()}: HF derives position ids from pad_token_id")
    if problems:
        raise ValueError(f"cannot export to Hugging Face {HF_ARCHITECTURES[head and head.kind]}, nothing was "
                         "written: " + "; ".join(problems))
    others = [h.name for h in model_heads(model) if h != head]
    warnings = ([f"heads {others} are not exported (a Hugging Face model carries one head)"] if others else [])
    warnings += head_warnings
    for flag, value, what in (("--activation-dropout", getattr(layers[0].activation_dropout_module, "p", 0.0),
                               "dropout after the FFN activation"),
                              ("--encoder-layerdrop", getattr(encoder, "encoder_layerdrop", 0.0), "layer drop")):
        if float(value or 0.0) > 0:
            warnings.append(f"{flag} {float(value)} is not exported: HF has no {what} (training only; outputs in eval "
                            "mode are unaffected)")
    attention = layers[0].self_attn
    return ExportLayout(
        num_layers=len(layers), num_heads=attention.num_heads, hidden=hidden, ffn=layers[0].fc1.out_features,
        vocab=vocab, position_rows=encoder.embed_positions.weight.shape[0], padding_idx=dictionary.pad(),
        windows=tuple(windows), layer_norm_eps=eps[0] if eps else FAIRSEQ_LAYERNORM_EPS, dropout=dropout,
        attention_dropout=float(attention.config.dropout), tied=lm_head.weight is encoder.embed_tokens.weight,
        head=head, outputs=outputs, warnings=warnings)
