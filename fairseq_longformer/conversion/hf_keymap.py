"""fairseq Longformer <-> Hugging Face transformers (``LongformerForMaskedLM``, and for fine-tuned
models ``LongformerForSequenceClassification`` / ``LongformerForQuestionAnswering``): the key map,
and what is decided at this boundary, once. The conversion itself: ``hf_export`` (fairseq -> HF,
``longformer-export-hf``), ``hf_tokenizer`` (the tokenizer files the export writes), ``hf_import``
(HF Longformer or RoBERTa -> fairseq, ``longformer-import-hf``).

Export (``longformer-export-hf``): a fairseq Longformer checkpoint -> a folder that
``transformers.LongformerForMaskedLM.from_pretrained`` / ``AutoModelForMaskedLM`` load offline:
``config.json``, ``model.safetensors``, ``fairseq_dict.txt`` (the fairseq dictionary, kept for the
way back) and, when a tokenizer is given, tokenizer files ``AutoTokenizer`` loads, mapping text to
the ids the fairseq model saw.

Import (``longformer-import-hf``): a Hugging Face Longformer or RoBERTa folder -> ``model.pt`` (with
the ``cfg`` fairseq's ``checkpoint_utils`` and ``fairseq-train --restore-file`` read) + ``dict.txt``.

What is decided at this boundary, once:

* Window. Our ``--attention-window`` w is ONE-sided (each token sees w tokens on each side); HF's
  ``attention_window`` is TWO-sided. Export writes 2w per layer; import reads HF // 2.
* What HF cannot represent stops the export before anything is written, with the setting and the
  reason: dilation > 1 (also per head), causal attention, a window of 0, pre-layer-norm layers,
  scaled embeddings, sinusoidal positions, activations other than exact GELU, layer norms with
  different epsilons.
* ``token_type_embeddings``: HF adds row 0 of a (type_vocab_size, C) table to every token; fairseq's
  RoBERTa has no such table. Export writes ONE row of zeros (type_vocab_size 1), which adds exactly
  nothing. Import folds row 0 into every row of the position table (same sum, every token has
  exactly one position) and drops rows 1.. with a warning (fairseq has no segment ids).
* LM head: fairseq ties ``encoder.lm_head.weight`` to the token embeddings (unless
  ``--untie-weights-roberta``); HF ties ``lm_head.decoder.weight`` to ``word_embeddings`` when
  ``tie_word_embeddings`` is true. Tied: the decoder weight is not written (HF re-ties it);
  untied: it is written and ``tie_word_embeddings`` is false. ``lm_head.decoder.bias`` is HF's alias
  of ``lm_head.bias`` and is written too.
* Task heads. An HF model carries one head, unnamed; a fairseq model may hold several, by name, in
  ``model.classification_heads`` (RoBERTa's, task ``longformer_classification``) and
  ``model.span_heads`` (task ``longformer_qa``). A head export writes the body and that one head
  (``classifier.dense/out_proj``, or ``qa_outputs``) and no LM head (a fine-tuned model's LM head
  is whatever pretraining left). Which head, and its labels: ``hf_heads``.
* Dictionary. fairseq's Dictionary is <s>=0, <pad>=1, </s>=2, <unk>=3, then dict.txt's symbols,
  then <mask>, appended by the masked-LM task. HF ids are used as they are: import writes a
  dict.txt whose line k is the placeholder symbol ``hf:{k + 4}`` (a label only: fairseq's binaries
  hold ids, and ``hf:`` cannot be mistaken for the GPT-2 ids in RoBERTa's dict.txt), so fairseq
  id == HF id for every token, and the task's <mask> lands on HF's last id (checked against the
  tokenizer when the folder has one). A folder ``hf_export`` wrote carries ``fairseq_dict.txt``;
  import uses it instead, so the way back restores the original symbols.

The key map is one declarative table (``MODULE_TABLE``, ``{}`` = layer index, ``{base}`` = HF's
base-model prefix); the reverse map is derived from it, and key sets and shapes are asserted both
ways against shapes derived from the config.

Shapes: V vocabulary (dictionary incl. <mask>), C hidden size, F feed-forward size,
P position rows (= positions + padding_idx + 1, e.g. 4098 for 4,096 tokens), L a head's outputs
(classes; 2 for QA's start and end).
"""
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from torch import Tensor

# ----------------------------------------------------------------------------------------------
# The key map: one row per module. Columns: fairseq module, HF module, weight shape, bias shape
# (None: no bias), when the row applies ("all"; "global": HF Longformer only, RoBERTa has no
# global projections; "lm": the masked-LM head, exported only by a masked-LM export).
# Dims: V vocab, C hidden, F ffn, P position rows.

FS_ENCODER = "encoder.sentence_encoder."
FS_LAYER = FS_ENCODER + "layers.{}."
HF_LAYER = "{base}.encoder.layer.{}."
_CC, _FC, _CF, _C, _F = ("C", "C"), ("F", "C"), ("C", "F"), ("C",), ("F",)

MODULE_TABLE: Tuple[Tuple[str, str, Tuple[str, ...], Optional[Tuple[str, ...]], str], ...] = (
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
)
# Single tensors outside the module pattern, all of the LM head: (fairseq key, HF key, shape,
# when); "untied": only when the output projection is not tied to the token embeddings.
TENSOR_TABLE: Tuple[Tuple[str, str, Tuple[str, ...], str], ...] = (
    ("encoder.lm_head.bias", "lm_head.bias", ("V",), "all"),
    ("encoder.lm_head.weight", "lm_head.decoder.weight", ("V", "C"), "untied"),
)
# HF tensors with no fairseq counterpart, handled explicitly (see the module docstring).
HF_TOKEN_TYPE = "{base}.embeddings.token_type_embeddings.weight"
HF_DECODER_BIAS = "lm_head.decoder.bias"  # HF's alias of lm_head.bias
HF_DECODER_WEIGHT = "lm_head.decoder.weight"
HF_IGNORED_BUFFERS = ("{base}.embeddings.position_ids", "{base}.embeddings.token_type_ids")
FAIRSEQ_TIED_HEAD = "encoder.lm_head.weight"
FAIRSEQ_TOKENS = FS_ENCODER + "embed_tokens.weight"
FAIRSEQ_POSITIONS = FS_ENCODER + "embed_positions.weight"



class HeadRef(NamedTuple):
    """One task head of a fairseq model: kind "classification" (``model.classification_heads``) or
    "span" (``model.span_heads``), and its name there."""

    kind: str
    name: str


# The task heads: fairseq ModuleDict per kind, and one row per module as in MODULE_TABLE (kind,
# fairseq module with the head's {name}, HF module, weight shape, bias shape). HF's classifier
# is RoBERTa's (dense C -> C, tanh, out_proj C -> L, on <s>); qa_outputs is fairseq's span head.
HEAD_MODULES = {"classification": "classification_heads", "span": "span_heads"}
HEAD_TABLE: Tuple[Tuple[str, str, str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("classification", "classification_heads.{name}.dense", "classifier.dense", _CC, _C),
    ("classification", "classification_heads.{name}.out_proj", "classifier.out_proj", ("L", "C"), ("L",)),
    ("span", "span_heads.{name}.qa_outputs", "qa_outputs", ("L", "C"), ("L",)),
)
# The HF class of each export (head kind; None: the masked LM), and the prefix of its head's tensors.
HF_ARCHITECTURES = {None: "LongformerForMaskedLM", "classification": "LongformerForSequenceClassification",
                    "span": "LongformerForQuestionAnswering"}
HF_HEAD_PREFIXES = {None: "lm_head.", "classification": "classifier.", "span": "qa_outputs."}

HF_BASE = {"longformer": "longformer", "roberta": "roberta"}  # model_type -> base-model prefix
FAIRSEQ_LAYERNORM_EPS = 1e-5  # fairseq's LayerNorm default; no flag changes it
DICT_COPY = "fairseq_dict.txt"  # the fairseq dictionary, written by export, read by import
PLACEHOLDER = "hf:{}"  # dict.txt symbol for HF id k when no fairseq dictionary came along
WEIGHTS_NAME = "model.safetensors"
# Files of a HF tokenizer, copied into the import's output (OUTDIR/hf_tokenizer/).
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                      "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model",
                      "added_tokens.json")


def _module_rows(fs_module: str, hf_module: str, weight, bias) -> List[Tuple[str, str, Tuple[str, ...]]]:
    rows = [(fs_module + ".weight", hf_module + ".weight", weight)]
    if bias is not None:
        rows.append((fs_module + ".bias", hf_module + ".bias", bias))
    return rows


def key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
            tied: bool = True, head: Optional[HeadRef] = None) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """fairseq key -> (HF key, symbolic shape) for every tensor the map covers, from the tables:
    the body, then the LM head (``head`` None) or the task head ``head``."""
    rows: List[Tuple[str, str, Tuple[str, ...]]] = []
    for fs, hf, weight, bias, when in MODULE_TABLE:
        if (when == "global" and not global_projections) or (when == "lm" and head is not None):
            continue
        for i in range(num_layers) if "{}" in fs else [None]:
            fs_module = fs.format(i) if i is not None else fs
            hf_module = hf.format(i, base=base) if i is not None else hf.format(base=base)
            rows += _module_rows(fs_module, hf_module, weight, bias)
    if head is None:
        for fs, hf, shape, when in TENSOR_TABLE:
            if when == "untied" and tied:
                continue
            rows.append((fs, hf, shape))
    else:
        for kind, fs, hf, weight, bias in HEAD_TABLE:
            if kind == head.kind:
                rows += _module_rows(fs.format(name=head.name), hf, weight, bias)
    forward = {fs: (hf, shape) for fs, hf, shape in rows}
    assert len(forward) == len(rows) and len({hf for hf, _ in forward.values()}) == len(rows), \
        "the key table maps two tensors to one name"
    per_layer = sum((2 if b is not None else 1) for fs, _, _, b, w in MODULE_TABLE
                    if "{}" in fs and (w != "global" or global_projections))
    assert sum(1 for k in forward if ".layers." in k) == per_layer * num_layers
    return forward


def reverse_key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
                    tied: bool = True, head: Optional[HeadRef] = None) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """HF key -> (fairseq key, symbolic shape): the inverse of ``key_map``, never written by hand."""
    return {hf: (fs, shape) for fs, (hf, shape) in key_map(num_layers, base, global_projections, tied, head).items()}


def shape_of(spec: Sequence[str], dims: Mapping[str, int]) -> Tuple[int, ...]:
    """A symbolic shape such as ("V", "C") in numbers, from ``dims`` ({"V": ..., "C": ...})."""
    return tuple(int(dims[d]) for d in spec)


def check_shapes(tensors: Mapping[str, Tensor], expected: Mapping[str, Tuple[int, ...]], what: str) -> None:
    """Raise ValueError naming every tensor whose shape is not the expected one."""
    wrong = [f"{k}: {tuple(tensors[k].shape)} (expected {shape})" for k, shape in expected.items()
             if tuple(tensors[k].shape) != shape]
    if wrong:
        raise ValueError(f"{what}: tensors with unexpected shapes: " + "; ".join(wrong))
