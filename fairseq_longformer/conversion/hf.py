"""fairseq Longformer <-> Hugging Face transformers (``LongformerForMaskedLM``), both ways.

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
* Dictionary. fairseq's Dictionary is <s>=0, <pad>=1, </s>=2, <unk>=3, then dict.txt's symbols,
  then <mask>, appended by the masked-LM task. HF ids are used as they are: import writes a
  dict.txt whose line k is the placeholder symbol ``hf:{k + 4}`` (a label only: fairseq's binaries
  hold ids, and ``hf:`` cannot be mistaken for the GPT-2 ids in RoBERTa's dict.txt), so fairseq
  id == HF id for every token, and the task's <mask> lands on HF's last id (checked against the
  tokenizer when the folder has one). A folder this module exported carries ``fairseq_dict.txt``;
  import uses it instead, so the way back restores the original symbols.

The key map is one declarative table (``MODULE_TABLE``, ``{}`` = layer index, ``{base}`` = HF's
base-model prefix); the reverse map is derived from it, and key sets and shapes are asserted both
ways against shapes derived from the config.

Shapes: V vocabulary (dictionary incl. <mask>), C hidden size, F feed-forward size,
P position rows (= positions + padding_idx + 1, e.g. 4098 for 4,096 tokens).
"""
import contextlib
import copy
import json
import logging
import os
import shutil
import tempfile
import warnings as warnings_module
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .positions import extend_positions
from .train_flags import model_train_flags

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------
# The key map: one row per module. Columns: fairseq module, HF module, weight shape, bias shape
# (None: no bias), when the row applies ("all"; "global": HF Longformer only, RoBERTa has no
# global projections). Dims: V vocab, C hidden, F ffn, P position rows.

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
    ("encoder.lm_head.dense", "lm_head.dense", _CC, _C, "all"),
    ("encoder.lm_head.layer_norm", "lm_head.layer_norm", _C, _C, "all"),
)
# Single tensors outside the module pattern: (fairseq key, HF key, shape, when); "untied": only
# when the output projection is not tied to the token embeddings.
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

HF_BASE = {"longformer": "longformer", "roberta": "roberta"}  # model_type -> base-model prefix
FAIRSEQ_LAYERNORM_EPS = 1e-5  # fairseq's LayerNorm default; no flag changes it
DICT_COPY = "fairseq_dict.txt"  # the fairseq dictionary, written by export, read by import
PLACEHOLDER = "hf:{}"  # dict.txt symbol for HF id k when no fairseq dictionary came along
WEIGHTS_NAME = "model.safetensors"
# Files of a HF tokenizer, copied into the import's output (OUTDIR/hf_tokenizer/).
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                      "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model",
                      "added_tokens.json")


def key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
            tied: bool = True) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """fairseq key -> (HF key, symbolic shape) for every tensor the map covers, from the tables."""
    rows: List[Tuple[str, str, Tuple[str, ...]]] = []
    for fs, hf, weight, bias, when in MODULE_TABLE:
        if when == "global" and not global_projections:
            continue
        for i in range(num_layers) if "{}" in fs else [None]:
            fs_module = fs.format(i) if i is not None else fs
            hf_module = hf.format(i, base=base) if i is not None else hf.format(base=base)
            rows.append((fs_module + ".weight", hf_module + ".weight", weight))
            if bias is not None:
                rows.append((fs_module + ".bias", hf_module + ".bias", bias))
    for fs, hf, shape, when in TENSOR_TABLE:
        if when == "untied" and tied:
            continue
        rows.append((fs, hf, shape))
    forward = {fs: (hf, shape) for fs, hf, shape in rows}
    assert len(forward) == len(rows) and len({hf for hf, _ in forward.values()}) == len(rows), \
        "the key table maps two tensors to one name"
    per_layer = sum((2 if b is not None else 1) for fs, _, _, b, w in MODULE_TABLE
                    if "{}" in fs and (w != "global" or global_projections))
    assert sum(1 for k in forward if ".layers." in k) == per_layer * num_layers
    return forward


def reverse_key_map(num_layers: int, base: str = "longformer", global_projections: bool = True,
                    tied: bool = True) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """HF key -> (fairseq key, symbolic shape): the inverse of ``key_map``, never written by hand."""
    return {hf: (fs, shape) for fs, (hf, shape) in key_map(num_layers, base, global_projections, tied).items()}


def _shape(spec: Sequence[str], dims: Mapping[str, int]) -> Tuple[int, ...]:
    return tuple(int(dims[d]) for d in spec)


def _check_shapes(tensors: Mapping[str, Tensor], expected: Mapping[str, Tuple[int, ...]], what: str) -> None:
    wrong = [f"{k}: {tuple(tensors[k].shape)} (expected {shape})" for k, shape in expected.items()
             if tuple(tensors[k].shape) != shape]
    if wrong:
        raise ValueError(f"{what}: tensors with unexpected shapes: " + "; ".join(wrong))


# ----------------------------------------------------------------------------------------------
# Writing a folder atomically


def check_output_dir(out_dir, overwrite: bool = False) -> Path:
    """Raise FileExistsError unless ``out_dir`` is absent, an empty folder, or ``overwrite``."""
    out_dir = Path(out_dir).absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output {str(out_dir)!r} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"output folder {str(out_dir)!r} exists and is not empty (pass --overwrite "
                              "to replace it)")
    return out_dir


@contextlib.contextmanager
def staged_output(out_dir, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder next to ``out_dir``; on success it becomes ``out_dir`` (one
    rename), on any error it is removed and ``out_dir`` is untouched (or still absent).

    An existing empty ``out_dir`` is replaced; a non-empty one only with ``overwrite``.
    """
    out_dir = check_output_dir(out_dir, overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700 folders
        yield tmp
        if out_dir.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            os.rmdir(old)
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------------------------
# Export: what the fairseq model is, and whether HF can say it


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
    warnings: List[str] = field(default_factory=list)

    @property
    def max_positions(self) -> int:
        return self.position_rows - self.padding_idx - 1

    def dims(self) -> Dict[str, int]:
        return {"V": self.vocab, "C": self.hidden, "F": self.ffn, "P": self.position_rows}


def _is_exact_gelu(fn) -> bool:
    from fairseq import utils

    return fn is utils.get_activation_fn("gelu") or fn is torch.nn.functional.gelu


def _name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


def inspect_model(model, dictionary) -> ExportLayout:
    """Read the exportable layout of a built fairseq Longformer; raise ValueError naming every
    setting HF's LongformerForMaskedLM cannot represent (and why), before anything is written."""
    from fairseq.modules import LearnedPositionalEmbedding

    from ..models.longformer import LongformerModel
    from ..modules.self_attention import LongformerSelfAttention

    if not isinstance(model, LongformerModel):
        raise ValueError(f"expected a fairseq Longformer (model 'longformer'), got {type(model).__name__}: "
                         "convert a RoBERTa checkpoint with longformer-convert-roberta first")
    encoder = model.encoder.sentence_encoder
    layers = list(encoder.layers)
    problems: List[str] = []
    windows = []
    for i, layer in enumerate(layers):
        attn = layer.self_attn
        if not isinstance(attn, LongformerSelfAttention):
            problems.append(f"layer {i}: self-attention is {type(attn).__name__}, not LongformerSelfAttention")
            continue
        pattern = attn.config.pattern
        per_head = pattern.dilation_per_head(attn.num_heads)
        if len(set(per_head)) > 1:
            problems.append(
                f"--attention-dilation: layer {i} uses a different dilation per head "
                f"({':'.join(map(str, per_head))}); HF Longformer applies one undilated window to every head")
        elif per_head[0] > 1:
            problems.append(f"--attention-dilation: layer {i} has dilation {per_head[0]}; HF Longformer has no "
                            "dilated attention (its sliding window is contiguous)")
        if pattern.causal:
            problems.append(f"--attention-causal: layer {i} is causal (token i sees i-w..i); HF Longformer's "
                            "sliding window is always two-sided")
        if pattern.window < 1:
            problems.append(f"--attention-window: layer {i} has w = {pattern.window}; HF's attention_window "
                            "(2w) must be a positive even number, so w = 0 has no HF equivalent")
        windows.append(pattern.window)
        if getattr(layer, "normalize_before", False):
            problems.append(f"--encoder-normalize-before: layer {i} applies layer norm before attention "
                            "(pre-LN); HF Longformer is post-LN")
        if not _is_exact_gelu(layer.activation_fn):
            problems.append(f"--activation-fn: layer {i} uses {_name(layer.activation_fn)}; only exact GELU "
                            "('gelu') is exportable (HF's LM head hard-codes it)")
    if windows and all(w >= 1 for w in windows) and any((2 * max(windows)) % (2 * w) for w in windows):
        problems.append(
            f"--attention-window {','.join(map(str, windows))}: HF pads every input to a multiple of the largest "
            f"attention_window ({2 * max(windows)}) and each layer needs the length to be a multiple of its own "
            f"(2w = {', '.join(str(2 * w) for w in windows)}); per-layer windows must each divide the largest")
    if encoder.layer_norm is not None:
        problems.append("--encoder-normalize-before: the encoder ends in a final layer norm; HF Longformer has none")
    if encoder.layernorm_embedding is None:
        problems.append("--layernorm-embedding is off: HF Longformer always normalizes the embeddings")
    if float(encoder.embed_scale) != 1.0:
        problems.append(f"--no-scale-embedding is off: embeddings are scaled by {float(encoder.embed_scale):g}; "
                        "HF Longformer does not scale them")
    if not isinstance(encoder.embed_positions, LearnedPositionalEmbedding):
        problems.append(f"positions are {type(encoder.embed_positions).__name__}; HF Longformer has learned "
                        "positions only (--encoder-learned-pos)")
    if encoder.quant_noise is not None or getattr(layers[0] if layers else None, "quant_noise", 0):
        problems.append("--quant-noise-pq: quantization noise has no HF equivalent")
    head = model.encoder.lm_head
    if not _is_exact_gelu(head.activation_fn):
        problems.append(f"--activation-fn: the LM head uses {_name(head.activation_fn)}; HF's Longformer LM head "
                        "hard-codes exact GELU")
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
        raise ValueError("cannot export to Hugging Face LongformerForMaskedLM, nothing was written:\n  - "
                         + "\n  - ".join(problems))

    warnings = []
    if getattr(model, "classification_heads", None):
        warnings.append(f"classification heads {sorted(model.classification_heads)} are not exported "
                        "(LongformerForMaskedLM has the MLM head only)")
    activation_dropout = float(getattr(layers[0].activation_dropout_module, "p", 0.0))
    if activation_dropout > 0:
        warnings.append(f"--activation-dropout {activation_dropout} is not exported: HF has no dropout after the "
                        "FFN activation (training only; outputs in eval mode are unaffected)")
    if float(getattr(encoder, "encoder_layerdrop", 0.0) or 0.0) > 0:
        warnings.append(f"--encoder-layerdrop {encoder.encoder_layerdrop} is not exported: HF has no layer drop "
                        "(training only; outputs in eval mode are unaffected)")
    attention = layers[0].self_attn
    return ExportLayout(
        num_layers=len(layers),
        num_heads=attention.num_heads,
        hidden=encoder.embed_tokens.weight.shape[1],
        ffn=layers[0].fc1.out_features,
        vocab=vocab,
        position_rows=encoder.embed_positions.weight.shape[0],
        padding_idx=dictionary.pad(),
        windows=tuple(windows),
        layer_norm_eps=eps[0] if eps else FAIRSEQ_LAYERNORM_EPS,
        dropout=float(layers[0].dropout_module.p),
        attention_dropout=float(getattr(attention, "dropout", 0.0) or 0.0),
        tied=head.weight is encoder.embed_tokens.weight,
        warnings=warnings,
    )


def hf_config_dict(layout: ExportLayout, dictionary) -> Dict[str, object]:
    """The LongformerConfig fields export writes, each from the built model or its dictionary."""
    return {
        "architectures": ["LongformerForMaskedLM"],
        "vocab_size": layout.vocab,  # rows of embed_tokens == len(dictionary) incl. <mask>
        "hidden_size": layout.hidden,  # embed_tokens.weight.shape[1] (--encoder-embed-dim)
        "num_hidden_layers": layout.num_layers,  # len(encoder.layers) (--encoder-layers)
        "num_attention_heads": layout.num_heads,  # self_attn.num_heads (--encoder-attention-heads)
        "intermediate_size": layout.ffn,  # fc1.out_features (--encoder-ffn-embed-dim)
        "hidden_act": "gelu",  # checked: fairseq's activation is exact GELU
        "hidden_dropout_prob": layout.dropout,  # dropout_module.p (--dropout)
        "attention_probs_dropout_prob": layout.attention_dropout,  # 0: the banded kernels have none
        "max_position_embeddings": layout.position_rows,  # embed_positions rows = tokens + pad + 1
        "type_vocab_size": 1,  # one all-zero row (fairseq has no segment embeddings)
        "initializer_range": 0.02,  # fairseq's init_bert_params std (used only to init new heads)
        "layer_norm_eps": layout.layer_norm_eps,  # LayerNorm.eps of every norm (checked equal)
        "pad_token_id": dictionary.pad(),
        "bos_token_id": dictionary.bos(),
        "eos_token_id": dictionary.eos(),
        "sep_token_id": dictionary.eos(),  # RoBERTa separates segments with </s>
        "attention_window": [2 * w for w in layout.windows],  # TWO-sided, per layer
        "tie_word_embeddings": layout.tied,  # lm_head.weight is embed_tokens.weight
    }


def fairseq_to_hf_state(state: Mapping[str, Tensor], layout: ExportLayout) -> Dict[str, Tensor]:
    """fairseq state dict -> the tensors of model.safetensors (keys and shapes asserted)."""
    mapping = key_map(layout.num_layers, "longformer", global_projections=True, tied=layout.tied)
    state = {k: v for k, v in state.items()
             if not k.endswith(".version") and not k.startswith("classification_heads.")}
    if layout.tied:
        assert torch.equal(state[FAIRSEQ_TIED_HEAD], state[FAIRSEQ_TOKENS]), "tied LM head differs from embeddings"
        state.pop(FAIRSEQ_TIED_HEAD)
    missing = sorted(set(mapping) - set(state))
    unmapped = sorted(set(state) - set(mapping))
    if missing or unmapped:
        raise ValueError(f"fairseq state dict does not match the key map: missing {missing}, unmapped {unmapped}")
    dims = layout.dims()
    _check_shapes(state, {fs: _shape(spec, dims) for fs, (_, spec) in mapping.items()}, "fairseq model")
    out = {hf: state[fs].detach().to("cpu", torch.float32).contiguous().clone() for fs, (hf, _) in mapping.items()}
    # No fairseq counterpart: one zero row adds nothing to any embedding.
    out[HF_TOKEN_TYPE.format(base="longformer")] = torch.zeros(1, layout.hidden)
    # HF's alias of lm_head.bias (tied in HF): written so every HF version finds it.
    out[HF_DECODER_BIAS] = out["lm_head.bias"].clone()
    assert len(out) == len(mapping) + 2
    return out


# ----------------------------------------------------------------------------------------------
# Export: tokenizers


@dataclass(frozen=True)
class TokenizerFiles:
    """The tokenizer the fairseq data was made with: GPT-2 BPE or a sentencepiece model."""

    gpt2_encoder_json: Optional[str] = None
    gpt2_vocab_bpe: Optional[str] = None
    sentencepiece_model: Optional[str] = None

    @property
    def kind(self) -> Optional[str]:
        gpt2 = self.gpt2_encoder_json is not None or self.gpt2_vocab_bpe is not None
        if gpt2 and self.sentencepiece_model is not None:
            raise ValueError("give either --gpt2-encoder-json/--gpt2-vocab-bpe or --sentencepiece-model, not both")
        if gpt2 and (self.gpt2_encoder_json is None or self.gpt2_vocab_bpe is None):
            raise ValueError("--gpt2-encoder-json and --gpt2-vocab-bpe go together: give both")
        for path in (self.gpt2_encoder_json, self.gpt2_vocab_bpe, self.sentencepiece_model):
            if path is not None and not os.path.isfile(path):
                raise FileNotFoundError(f"tokenizer file {path!r} not found")
        return "gpt2" if gpt2 else "sentencepiece" if self.sentencepiece_model else None


def _special_tokens(dictionary) -> Dict[str, str]:
    mask = "<mask>" if "<mask>" in dictionary.indices else None
    if mask is None:
        raise ValueError("the dictionary has no <mask>: a masked-LM tokenizer needs one (fairseq's masked_lm "
                         "task appends it; pass the task's dictionary)")
    s = dictionary.symbols
    return {"bos_token": s[dictionary.bos()], "eos_token": s[dictionary.eos()], "unk_token": s[dictionary.unk()],
            "pad_token": s[dictionary.pad()], "cls_token": s[dictionary.bos()], "sep_token": s[dictionary.eos()],
            "mask_token": mask}


def gpt2_tokenizer(encoder_json: str, vocab_bpe: str, dictionary, model_max_length: int):
    """A transformers RobertaTokenizer whose vocabulary maps each GPT-2 BPE token straight to its
    fairseq id (fairseq's dict.txt lists GPT-2 ids as decimal strings, re-indexed by frequency).

    A BPE token whose GPT-2 id is not in the dictionary becomes <unk> in fairseq; a BPE vocabulary
    cannot give two tokens one id, so such tokens and every merge that produces or uses them are
    left out (with a warning): text containing them, or longer tokens built through them, is split
    into other pieces instead. Dictionaries made from the BPE itself (the project's preprocessing
    without --srcdict) or RoBERTa's dict.txt hold every GPT-2 token, and the ids are then exact.
    """
    from transformers import RobertaTokenizer

    with open(encoder_json, encoding="utf-8") as f:
        encoder: Dict[str, int] = json.load(f)
    with open(vocab_bpe, encoding="utf-8") as f:
        # exactly what fairseq's gpt2_bpe_utils.get_encoder reads: a version line, then merges
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
    specials = _special_tokens(dictionary)
    vocab: Dict[str, int] = {specials[k]: dictionary.index(specials[k])
                             for k in ("bos_token", "pad_token", "eos_token", "unk_token", "mask_token")}
    absent = []
    for token, gpt2_id in sorted(encoder.items(), key=lambda kv: kv[1]):
        index = dictionary.indices.get(str(gpt2_id))
        if index is None:
            absent.append(token)
        elif token not in vocab:  # a special's text wins (HF matches specials before BPE)
            vocab[token] = index
    taken = set(vocab.values())
    for index in range(len(dictionary)):  # ids no BPE token reaches (madeupword padding, ...)
        if index not in taken:
            name = dictionary.symbols[index]
            vocab[name if name not in vocab else f"<fairseq_unused_{index}>"] = index
    assert len(set(vocab.values())) == len(vocab) == len(dictionary), "GPT-2 vocabulary is not one-to-one"
    kept = [m for m in merges if len(m) == 2 and m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    if absent:
        logger.warning(f"{len(absent)} of {len(encoder)} GPT-2 BPE tokens are not in the dictionary (fairseq maps "
                       f"them to <unk>); the exported tokenizer leaves them and the {len(merges) - len(kept)} merges "
                       f"using them out, so text containing them, or tokens built through them, tokenizes into "
                       f"other pieces than in fairseq (e.g. {absent[:5]})")
    tokenizer = RobertaTokenizer(vocab=vocab, merges=kept, add_prefix_space=False,
                                 model_max_length=model_max_length, **specials)
    return tokenizer, {"vocab.json": vocab, "merges.txt": kept}


# sentencepiece's ModelProto, read with a minimal protobuf wire-format reader (the protobuf package
# is not a dependency). Field numbers from sentencepiece_model.proto.
_SP_NORMAL, _SP_UNKNOWN, _SP_CONTROL, _SP_USER_DEFINED, _SP_UNUSED, _SP_BYTE = 1, 2, 3, 4, 5, 6


def _proto_fields(buf: bytes):
    """(field number, value) for each field of one protobuf message (varint, 32/64-bit, bytes)."""
    def varint(i):
        shift = result = 0
        while True:
            b = buf[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result, i
            shift += 7

    i = 0
    while i < len(buf):
        key, i = varint(i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, value


def read_sentencepiece_model(path: str) -> Dict[str, object]:
    """pieces [(piece, score, type)], normalizer and trainer settings of a sentencepiece .model."""
    import struct

    with open(path, "rb") as f:
        buf = f.read()
    spec = {"pieces": [], "model_type": 1, "byte_fallback": False, "treat_whitespace_as_suffix": False,
            "precompiled_charsmap": b"", "add_dummy_prefix": True, "remove_extra_whitespaces": True,
            "escape_whitespaces": True, "normalizer": ""}
    try:
        for number, value in _proto_fields(buf):
            if number == 1:  # SentencePiece
                piece, score, kind = "", 0.0, _SP_NORMAL
                for n, v in _proto_fields(value):
                    if n == 1:
                        piece = bytes(v).decode("utf-8")
                    elif n == 2:
                        score = struct.unpack("<f", v)[0]
                    elif n == 3:
                        kind = v
                spec["pieces"].append((piece, score, kind))
            elif number == 2:  # TrainerSpec
                for n, v in _proto_fields(value):
                    if n == 3:
                        spec["model_type"] = v
                    elif n == 35:
                        spec["byte_fallback"] = bool(v)
                    elif n == 24:
                        spec["treat_whitespace_as_suffix"] = bool(v)
            elif number == 3:  # NormalizerSpec
                for n, v in _proto_fields(value):
                    if n == 1:
                        spec["normalizer"] = bytes(v).decode("utf-8")
                    elif n == 2:
                        spec["precompiled_charsmap"] = bytes(v)
                    elif n == 3:
                        spec["add_dummy_prefix"] = bool(v)
                    elif n == 4:
                        spec["remove_extra_whitespaces"] = bool(v)
                    elif n == 5:
                        spec["escape_whitespaces"] = bool(v)
    except (IndexError, UnicodeDecodeError, struct.error, ValueError) as error:
        raise ValueError(f"{path!r} is not a sentencepiece model: {error}") from error
    if not spec["pieces"]:
        raise ValueError(f"{path!r} is not a sentencepiece model: it has no pieces")
    return spec


def sentencepiece_tokenizer(model_path: str, dictionary, model_max_length: int):
    """A tokenizers-library Unigram tokenizer over the sentencepiece pieces, laid out in the
    fairseq dictionary's order (vocabulary entry k = dictionary symbol k), so HF ids == fairseq ids.

    Reproduces sentencepiece: the precompiled normalization (NFKC etc.), whitespace stripping and
    collapsing, the "▁" dummy prefix, Viterbi over the pieces' scores, byte fallback. Dictionary
    entries sentencepiece never produces (madeupword padding, byte pieces) get the lowest normal
    score, which keeps sentencepiece's unknown-character penalty (min score - 10) unchanged.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    spec = read_sentencepiece_model(model_path)
    if spec["model_type"] != 1:
        kind = {2: "bpe", 3: "word", 4: "char"}.get(spec["model_type"], spec["model_type"])
        raise ValueError(f"--sentencepiece-model {model_path!r} is a {kind} model: only unigram sentencepiece "
                         "models (the project's default) are exported")
    if not spec["escape_whitespaces"] or spec["treat_whitespace_as_suffix"]:
        raise ValueError(f"--sentencepiece-model {model_path!r}: escape_whitespaces=false or "
                         "treat_whitespace_as_suffix=true has no equivalent in the exported tokenizer")
    specials = _special_tokens(dictionary)
    score = {p: s for p, s, t in spec["pieces"] if t in (_SP_NORMAL, _SP_USER_DEFINED)}
    kinds = {p: t for p, _, t in spec["pieces"]}
    normal = [s for p, s, t in spec["pieces"] if t == _SP_NORMAL]
    lowest = min(normal) if normal else 0.0
    vocab = [(symbol, score.get(symbol, lowest)) for symbol in dictionary.symbols]
    for k in ("bos_token", "pad_token", "eos_token", "unk_token", "mask_token"):
        vocab[dictionary.index(specials[k])] = (specials[k], 0.0)
    absent = [p for p, _, t in spec["pieces"] if t in (_SP_NORMAL, _SP_USER_DEFINED, _SP_BYTE)
              and p not in dictionary.indices]
    if absent:
        logger.warning(f"{len(absent)} sentencepiece pieces are not in the dictionary (fairseq maps them to "
                       f"<unk>); the exported tokenizer cannot produce them and segments around them "
                       f"(e.g. {absent[:5]})")
    byte_fallback = spec["byte_fallback"] and any(kinds.get(p) == _SP_BYTE for p in dictionary.symbols)
    tok = Tokenizer(models.Unigram(vocab, unk_id=dictionary.unk(), byte_fallback=byte_fallback))
    steps = []
    if spec["precompiled_charsmap"]:
        steps.append(normalizers.Precompiled(spec["precompiled_charsmap"]))
    if spec["remove_extra_whitespaces"]:
        steps += [normalizers.Strip(left=True, right=True), normalizers.Replace(Regex(" {2,}"), " ")]
    if steps:
        tok.normalizer = normalizers.Sequence(steps)
    # Split before each "▁" unless some piece spans a word boundary (inner "▁").
    inner = any("\u2581" in p[1:] for p, _, t in spec["pieces"] if t == _SP_NORMAL)
    prepend = "always" if spec["add_dummy_prefix"] else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=prepend, split=not inner)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(" ", 1, 0)] if spec["add_dummy_prefix"] else []))
    bos, eos = specials["bos_token"], specials["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, dictionary.bos()), (eos, dictionary.eos())])
    user_defined = [p for p, _, t in spec["pieces"] if t == _SP_USER_DEFINED and p in dictionary.indices]
    if user_defined:  # sentencepiece matches them verbatim, before normalization
        tok.add_tokens([AddedToken(p, normalized=False, special=False) for p in user_defined])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **specials), {}


def build_tokenizer(files: TokenizerFiles, dictionary, model_max_length: int):
    """(transformers tokenizer, extra files to write) for ``files``; None when no tokenizer given."""
    kind = files.kind
    try:
        if kind == "gpt2":
            return gpt2_tokenizer(files.gpt2_encoder_json, files.gpt2_vocab_bpe, dictionary, model_max_length)
        if kind == "sentencepiece":
            return sentencepiece_tokenizer(files.sentencepiece_model, dictionary, model_max_length)
    except ImportError as error:
        raise ImportError(f"exporting a tokenizer needs transformers and tokenizers "
                          f"(pip install 'fairseq-longformer[hf]'): {error}") from error
    return None, {}


# ----------------------------------------------------------------------------------------------
# Export: entry points


@dataclass
class ExportResult:
    out_dir: Path
    config: Dict[str, object]
    tokenizer: Optional[str]
    warnings: List[str]


def _write_dictionary(dictionary, path: Path) -> None:
    """dict.txt lines for the symbols after the specials; the task-appended trailing <mask> is left
    out, as in the dict.txt the model was trained from (the task appends it again)."""
    symbols = dictionary.symbols[dictionary.nspecial:]
    counts = dictionary.count[dictionary.nspecial:]
    if symbols and symbols[-1] == "<mask>":
        symbols, counts = symbols[:-1], counts[:-1]
    with open(path, "w", encoding="utf-8") as f:
        for symbol, count in zip(symbols, counts):
            f.write(f"{symbol} {int(count)}\n")


def _usual_permissions(folder: Path) -> None:
    """safetensors and mkstemp-style writers create 0600 files: give them the umask's permissions."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def export_model(model, dictionary, out_dir, tokenizer: Optional[TokenizerFiles] = None,
                 overwrite: bool = False) -> ExportResult:
    """Write a built fairseq Longformer (with the task's dictionary, <mask> included) as a
    Hugging Face LongformerForMaskedLM folder. All checks run before anything is written."""
    try:
        from safetensors.torch import save_file
        from transformers import LongformerConfig
    except ImportError as error:
        raise ImportError(f"export needs transformers and safetensors (pip install 'fairseq-longformer[hf]'): "
                          f"{error}") from error
    layout = inspect_model(model, dictionary)
    config = hf_config_dict(layout, dictionary)
    tensors = fairseq_to_hf_state(model.state_dict(), layout)
    hf_config = LongformerConfig(**config)
    dims = layout.dims()
    expected = {hf: _shape(spec, dims) for hf, (_, spec) in
                reverse_key_map(layout.num_layers, "longformer", True, layout.tied).items()}
    expected[HF_TOKEN_TYPE.format(base="longformer")] = (1, layout.hidden)
    expected[HF_DECODER_BIAS] = (layout.vocab,)
    assert set(expected) == set(tensors), sorted(set(expected) ^ set(tensors))
    _check_shapes(tensors, expected, "exported tensors")
    hf_tokenizer, extra_files = build_tokenizer(tokenizer or TokenizerFiles(), dictionary, layout.max_positions)
    for warning in layout.warnings:
        logger.warning(warning)

    with staged_output(out_dir, overwrite) as tmp:
        hf_config.save_pretrained(str(tmp))
        save_file(tensors, str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        _write_dictionary(dictionary, tmp / DICT_COPY)
        if hf_tokenizer is not None:
            hf_tokenizer.save_pretrained(str(tmp))
            if "vocab.json" in extra_files:  # the files transformers 4.x's slow tokenizer reads
                with open(tmp / "vocab.json", "w", encoding="utf-8") as f:
                    json.dump(extra_files["vocab.json"], f, ensure_ascii=False)
                with open(tmp / "merges.txt", "w", encoding="utf-8") as f:
                    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in extra_files["merges.txt"]))
        _usual_permissions(tmp)
    out_dir = Path(out_dir).absolute()
    logger.info(f"exported {layout.num_layers} layers, windows (one-sided) {list(layout.windows)} -> HF "
                f"attention_window {config['attention_window']}, to {out_dir}")
    return ExportResult(out_dir, config, tokenizer.kind if tokenizer else None, layout.warnings)


def load_fairseq_checkpoint(checkpoint, dict_path=None):
    """(model, dictionary) from a fairseq Longformer checkpoint through fairseq's own loader
    (upgrades old checkpoints). dict.txt: ``dict_path``, else next to the checkpoint, else in the
    checkpoint's --data folder."""
    import fairseq_longformer  # noqa: F401  (registers the model and task)
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name

    checkpoint = Path(checkpoint)
    if checkpoint.is_dir():
        checkpoint = checkpoint / "model.pt"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint {str(checkpoint)!r} not found")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    cfg = state.get("cfg")
    if cfg is None:
        raise ValueError(f"{str(checkpoint)!r} has no fairseq config (cfg/args): not a fairseq checkpoint")
    candidates = [Path(dict_path)] if dict_path is not None else [checkpoint.parent / "dict.txt"]
    if dict_path is None and cfg.task.get("data"):
        candidates.append(Path(str(cfg.task.data).split(os.pathsep)[0]) / "dict.txt")
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no dictionary: looked for {[str(p) for p in candidates]} (pass --dict)")
    with tempfile.TemporaryDirectory() as data:
        shutil.copyfile(found, os.path.join(data, "dict.txt"))  # the task reads DATA/dict.txt
        overwrite_args_by_name(cfg, {"data": data})
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], state=state)
    model = models[0].eval()
    return model, task.source_dictionary


def export_checkpoint(checkpoint, out_dir, dict_path=None, tokenizer: Optional[TokenizerFiles] = None,
                      overwrite: bool = False) -> ExportResult:
    """``longformer-export-hf``: fairseq checkpoint (+ dict.txt) -> Hugging Face folder."""
    check_output_dir(out_dir, overwrite)  # fail before the slow checkpoint load
    if tokenizer is not None:
        tokenizer.kind  # noqa: B018  (validates the tokenizer flags, same reason)
    model, dictionary = load_fairseq_checkpoint(checkpoint, dict_path)
    return export_model(model, dictionary, out_dir, tokenizer, overwrite)


# ----------------------------------------------------------------------------------------------
# Import: Hugging Face folder -> fairseq checkpoint


@dataclass
class ImportResult:
    checkpoint: Path
    dictionary: Path
    model_type: str
    attention_window: Tuple[int, ...]
    max_positions: int
    dims: Dict[str, int]
    untied: bool
    dictionary_source: str
    warnings: List[str] = field(default_factory=list)

    def train_flags(self) -> List[str]:
        """fairseq-train flags that build a model this checkpoint loads into."""
        d = self.dims
        flags = model_train_flags("longformer", d["layers"], d["hidden"], d["ffn"], d["heads"],
                                  self.attention_window, self.max_positions, self.checkpoint)
        flags += ["--pad-to-multiple", str(max(max(self.attention_window), 1))]
        return flags + (["--untie-weights-roberta"] if self.untied else [])


def load_hf_state_dict(hf_dir) -> Dict[str, Tensor]:
    """The tensors of a HF folder: model.safetensors (possibly sharded) or pytorch_model.bin."""
    hf_dir = Path(hf_dir)
    from safetensors.torch import load_file

    if (hf_dir / "model.safetensors").is_file():
        return load_file(str(hf_dir / "model.safetensors"))
    for index_name, loader in (("model.safetensors.index.json", lambda p: load_file(str(p))),
                               ("pytorch_model.bin.index.json",
                                lambda p: torch.load(p, map_location="cpu", weights_only=True))):
        if (hf_dir / index_name).is_file():
            with open(hf_dir / index_name, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            state = {}
            for shard in shards:
                state.update(loader(hf_dir / shard))
            return state
    if (hf_dir / "pytorch_model.bin").is_file():
        return torch.load(hf_dir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{str(hf_dir)!r} has no model.safetensors or pytorch_model.bin")


def hf_special_ids(hf_dir) -> Dict[str, int]:
    """Token text -> id for the tokenizer's added/special tokens, when the folder has a tokenizer."""
    hf_dir = Path(hf_dir)
    ids: Dict[str, int] = {}
    if (hf_dir / "tokenizer.json").is_file():
        with open(hf_dir / "tokenizer.json", encoding="utf-8") as f:
            for token in json.load(f).get("added_tokens", []):
                ids[token["content"]] = int(token["id"])
    if (hf_dir / "tokenizer_config.json").is_file():
        with open(hf_dir / "tokenizer_config.json", encoding="utf-8") as f:
            for index, token in (json.load(f).get("added_tokens_decoder") or {}).items():
                ids.setdefault(token["content"], int(index))
    return ids


def _check_hf_config(config: Mapping, model_type: str, problems: List[str]) -> None:
    def want(name, ok, why):
        if name in config and not ok(config[name]):
            problems.append(f"{name} = {config[name]!r}: {why}")

    want("hidden_act", lambda v: v == "gelu", "fairseq's Longformer is exported/imported with exact GELU only")
    want("layer_norm_eps", lambda v: abs(float(v) - FAIRSEQ_LAYERNORM_EPS) <= 1e-12,
         f"fairseq's layer norms use eps {FAIRSEQ_LAYERNORM_EPS} (no flag changes it)")
    want("position_embedding_type", lambda v: v in (None, "absolute"),
         "only absolute (learned) positions have a fairseq counterpart")
    want("is_decoder", lambda v: not v, "a decoder (causal) model is not a masked LM encoder")
    want("add_cross_attention", lambda v: not v, "cross-attention has no counterpart in the encoder")
    for name, fairseq_id in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2)):
        want(name, lambda v, i=fairseq_id: v is None or v == i,
             f"fairseq's Dictionary fixes this id to {fairseq_id}")
    if model_type == "longformer":
        windows = config.get("attention_window")
        values = windows if isinstance(windows, list) else [windows] * int(config["num_hidden_layers"])
        if len(values) != int(config["num_hidden_layers"]) or any(
                not isinstance(v, int) or v < 2 or v % 2 for v in values):
            problems.append(f"attention_window = {windows!r}: expected a positive even number (two-sided) "
                            "or one per layer")


def _fairseq_args(data: Path, layers, hidden, ffn, heads, windows, max_positions, dropout, untied):
    from fairseq import options

    flags = [str(data), "--task", "longformer_mlm", "--criterion", "longformer_mlm", "--arch", "longformer",
             "--encoder-layers", str(layers), "--encoder-embed-dim", str(hidden),
             "--encoder-ffn-embed-dim", str(ffn), "--encoder-attention-heads", str(heads),
             "--attention-window", ",".join(map(str, windows)), "--attention-dilation", "1",
             "--max-positions", str(max_positions), "--tokens-per-sample", str(max_positions),
             "--pad-to-multiple", str(max(max(windows), 1)), "--activation-fn", "gelu",
             "--dropout", repr(float(dropout)), "--attention-dropout", "0", "--activation-dropout", "0"]
    if untied:
        flags.append("--untie-weights-roberta")
    parser = options.get_training_parser(default_task="longformer_mlm")
    return options.parse_args_and_arch(parser, input_args=flags)


class _DictionaryTask:
    """What LongformerModel.build_model asks of a task."""

    def __init__(self, dictionary, positions):
        self.source_dictionary = dictionary
        self._positions = positions

    def max_positions(self):
        return self._positions


def import_hf(hf_dir, out_dir, max_positions: Optional[int] = None, attention_window=None,
              overwrite: bool = False) -> ImportResult:
    """``longformer-import-hf``: a HF Longformer or RoBERTa (masked LM) folder -> ``model.pt`` +
    ``dict.txt`` in ``out_dir``.

    max_positions: tokens of the fairseq model; default: the source's for a Longformer, 4096 for
    RoBERTa; more than the source extends the table with ``extend_positions`` (copy init).
    attention_window: one-sided w (one value or one per layer) for a RoBERTa source (default 256);
    a Longformer keeps its own (HF value // 2).
    """
    import fairseq_longformer  # noqa: F401  (registers the model, task and criterion)
    from fairseq.data import Dictionary
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    from ..attention import parse_per_layer
    from ..models.longformer import LongformerModel

    hf_dir = Path(hf_dir)
    check_output_dir(out_dir, overwrite)
    if not (hf_dir / "config.json").is_file():
        raise FileNotFoundError(f"{str(hf_dir)!r} has no config.json: not a Hugging Face model folder")
    with open(hf_dir / "config.json", encoding="utf-8") as f:
        config = json.load(f)
    model_type = config.get("model_type")
    if model_type not in HF_BASE:
        raise ValueError(f"model_type {model_type!r}: only 'longformer' and 'roberta' folders can be imported")
    problems: List[str] = []
    _check_hf_config(config, model_type, problems)
    if problems:
        raise ValueError(f"cannot import {str(hf_dir)!r}, nothing was written:\n  - " + "\n  - ".join(problems))
    warnings: List[str] = []
    base = HF_BASE[model_type]
    layers, heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
    hidden, ffn, vocab = int(config["hidden_size"]), int(config["intermediate_size"]), int(config["vocab_size"])
    padding_idx = 1
    source_rows = int(config["max_position_embeddings"])
    source_positions = source_rows - padding_idx - 1
    tied = bool(config.get("tie_word_embeddings", True))

    if model_type == "longformer":
        if attention_window is not None:
            raise ValueError("--attention-window applies to RoBERTa folders only: a Longformer keeps the window "
                             "it was trained with (config.json's attention_window // 2)")
        hf_windows = config["attention_window"]
        hf_windows = hf_windows if isinstance(hf_windows, list) else [hf_windows] * layers
        windows = tuple(int(w) // 2 for w in hf_windows)
    else:
        windows = parse_per_layer(attention_window if attention_window is not None else "256", layers,
                                  "attention-window")
        if any(w < 0 for w in windows):
            raise ValueError(f"--attention-window must be >= 0 (one-sided), got {attention_window!r}")
    if max_positions is None:
        max_positions = source_positions if model_type == "longformer" else 4096
    if max_positions < source_positions:
        raise ValueError(f"--max-positions {max_positions} is smaller than the source's {source_positions} "
                         "positions: positions can only be extended")

    # -- tensors: keys and shapes against the config
    state = load_hf_state_dict(hf_dir)
    if not any(k.startswith("lm_head.") for k in state):
        raise ValueError(f"{str(hf_dir)!r} has no lm_head.* tensors: import needs a masked-LM model "
                         f"({'Longformer' if base == 'longformer' else 'Roberta'}ForMaskedLM), not the bare encoder")
    reverse = reverse_key_map(layers, base, global_projections=(model_type == "longformer"), tied=tied)
    token_type_key = HF_TOKEN_TYPE.format(base=base)
    type_vocab = int(config.get("type_vocab_size", 1))
    dims = {"V": vocab, "C": hidden, "F": ffn, "P": source_rows}
    expected = {hf: _shape(spec, dims) for hf, (_, spec) in reverse.items()}
    expected[token_type_key] = (type_vocab, hidden)
    optional = {HF_DECODER_BIAS: (vocab,), **({HF_DECODER_WEIGHT: (vocab, hidden)} if tied else {})}
    ignored = {k.format(base=base) for k in HF_IGNORED_BUFFERS}
    pooler = sorted(k for k in state if k.startswith(f"{base}.pooler."))
    missing = sorted(set(expected) - set(state))
    unknown = sorted(set(state) - set(expected) - set(optional) - ignored - set(pooler))
    if missing or unknown:
        raise ValueError(f"{str(hf_dir)!r} does not match a {model_type} masked LM with {layers} layers: "
                         f"missing {missing[:12]}, unexpected {unknown[:12]}")
    _check_shapes(state, {**expected, **{k: v for k, v in optional.items() if k in state}}, str(hf_dir))
    if HF_DECODER_BIAS in state and not torch.equal(state[HF_DECODER_BIAS], state["lm_head.bias"]):
        raise ValueError("lm_head.decoder.bias differs from lm_head.bias: HF ties them; fairseq has one bias")
    if tied and HF_DECODER_WEIGHT in state and not torch.equal(
            state[HF_DECODER_WEIGHT], state[f"{base}.embeddings.word_embeddings.weight"]):
        raise ValueError("tie_word_embeddings is true but lm_head.decoder.weight differs from word_embeddings")
    if pooler:
        warnings.append(f"dropped the pooler ({', '.join(pooler)}): fairseq's masked LM has none")

    # -- dictionary: fairseq id == HF id
    specials = hf_special_ids(hf_dir)
    for text, fairseq_id in (("<s>", 0), ("<pad>", 1), ("</s>", 2), ("<unk>", 3), ("<mask>", vocab - 1)):
        if text in specials and specials[text] != fairseq_id:
            raise ValueError(f"the tokenizer puts {text} at id {specials[text]}; fairseq's dictionary puts it at "
                             f"{fairseq_id} (4 specials first, <mask> appended last by the masked_lm task)")

    # -- fairseq model built through its builders, then filled
    out_abs = Path(out_dir).absolute()
    args = _fairseq_args(out_abs, layers, hidden, ffn, heads, windows, max_positions,
                         config.get("hidden_dropout_prob", 0.1), untied=not tied)
    attention_dropout = float(config.get("attention_probs_dropout_prob", 0.0) or 0.0)
    if attention_dropout > 0:
        warnings.append(f"attention_probs_dropout_prob {attention_dropout} -> --attention-dropout 0: the "
                        "Longformer kernels have no dropout on attention probabilities (training only)")

    with tempfile.TemporaryDirectory() as scratch:
        dict_txt = Path(scratch) / "dict.txt"
        copied = hf_dir / DICT_COPY
        dictionary_source = "placeholders"
        if copied.is_file():
            candidate = Dictionary.load(str(copied))
            candidate.add_symbol("<mask>")
            if len(candidate) == vocab and candidate.index("<mask>") == vocab - 1:
                shutil.copyfile(copied, dict_txt)
                dictionary_source = DICT_COPY
            else:
                warnings.append(f"{DICT_COPY} gives {len(candidate)} symbols for {vocab} embedding rows: "
                                "ignored, placeholders written instead")
        if dictionary_source == "placeholders":
            if "<mask>" not in specials:
                warnings.append(f"no tokenizer says where <mask> is: assuming the last id ({vocab - 1}), where "
                                "fairseq's masked_lm task appends it")
            with open(dict_txt, "w", encoding="utf-8") as f:
                for index in range(4, vocab - 1):
                    f.write(f"{PLACEHOLDER.format(index)} 0\n")
        dictionary = Dictionary.load(str(dict_txt))
        dictionary.add_symbol("<mask>")  # what the masked_lm task does
        assert len(dictionary) == vocab and dictionary.index("<mask>") == vocab - 1
        model = LongformerModel.build_model(copy.deepcopy(args), _DictionaryTask(dictionary, max_positions))

        template = {k: v for k, v in model.state_dict().items()}
        forward = key_map(layers, base, global_projections=(model_type == "longformer"), tied=tied)
        new: Dict[str, Tensor] = {fs: state[hf].to(torch.float32).clone() for fs, (hf, _) in forward.items()}
        positions = new[FAIRSEQ_POSITIONS]
        token_types = state[token_type_key].to(torch.float32)
        if type_vocab > 1:
            warnings.append(f"token_type_embeddings rows 1..{type_vocab - 1} dropped: fairseq's RoBERTa has no "
                            "segment ids (row 0, the one every token gets by default, is kept)")
        if bool(token_types[0].ne(0).any()):
            positions = positions + token_types[0]  # every token gets exactly one position row
            logger.info("token_type_embeddings row 0 is not zero: folded into the position embeddings")
        new[FAIRSEQ_POSITIONS] = extend_positions(positions, max_positions, padding_idx=padding_idx, init="copy")
        if model_type == "roberta":
            for local, glob in (("q_proj", "q_global_proj"), ("k_proj", "k_global_proj"), ("v_proj", "v_global_proj")):
                for i in range(layers):
                    for p in ("weight", "bias"):
                        prefix = f"encoder.sentence_encoder.layers.{i}.self_attn."
                        new[f"{prefix}{glob}.{p}"] = new[f"{prefix}{local}.{p}"].clone()
        if tied:
            new[FAIRSEQ_TIED_HEAD] = new[FAIRSEQ_TOKENS]
        for key, value in template.items():  # buffers (version counters) come from the builder
            if key not in new:
                assert key.endswith(".version"), f"fairseq model has a tensor the map does not fill: {key}"
                new[key] = value
        assert set(new) == set(template), sorted(set(new) ^ set(template))
        _check_shapes(new, {k: tuple(v.shape) for k, v in template.items()}, "imported fairseq state")
        model.load_state_dict(new, strict=True)

        with warnings_module.catch_warnings():  # hydra's deprecation notices, not ours to act on
            warnings_module.simplefilter("ignore")
            cfg = convert_namespace_to_omegaconf(args)
        checkpoint = {
            "args": None,
            "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
            "model": model.state_dict(),
            # a fresh training state: update 0, no optimizer state (fairseq-train --restore-file
            # then builds its own optimizer; no --reset-* flag is needed)
            "optimizer_history": [{"criterion_name": "LongformerMLMLoss", "optimizer_name": "none",
                                   "lr_scheduler_state": {"best": None}, "num_updates": 0}],
            "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True,
                                               "version": 2}, "previous_training_time": 0.0},
            "last_optimizer_state": None,
        }
        tokenizer_files = [name for name in HF_TOKENIZER_FILES if (hf_dir / name).is_file()]
        for warning in warnings:
            logger.warning(warning)
        with staged_output(out_dir, overwrite) as tmp:
            torch.save(checkpoint, tmp / "model.pt")
            shutil.copyfile(dict_txt, tmp / "dict.txt")
            if tokenizer_files:
                (tmp / "hf_tokenizer").mkdir()
                for name in tokenizer_files:
                    shutil.copyfile(hf_dir / name, tmp / "hf_tokenizer" / name)
    logger.info(f"imported {model_type} ({layers} layers, window w={list(windows)}, {max_positions} positions) "
                f"to {out_abs}")
    return ImportResult(out_abs / "model.pt", out_abs / "dict.txt", model_type, tuple(windows), max_positions,
                        {"layers": layers, "hidden": hidden, "ffn": ffn, "heads": heads}, not tied,
                        dictionary_source, warnings)
