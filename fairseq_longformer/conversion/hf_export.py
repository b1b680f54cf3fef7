"""Export (``longformer-export-hf``): a fairseq Longformer checkpoint -> a Hugging Face
``LongformerForMaskedLM`` folder (``config.json``, ``model.safetensors``, ``fairseq_dict.txt`` and,
when a tokenizer is given, the tokenizer files), which ``from_pretrained`` loads offline. A
fine-tuned checkpoint exports its task head instead of the LM head:
``LongformerForSequenceClassification`` (labels from the task's label dictionary) or
``LongformerForQuestionAnswering`` (``hf_heads``).

Every check runs on the built model before anything is written (``inspect_model`` names each
setting HF cannot represent); the folder is assembled next to the output and renamed into place
(``atomic.staged_folder``). The key map and the conventions at this boundary: ``hf_keymap``.
"""
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

from ..atomic import check_output_dir, staged_folder
from .hf_heads import (
    checkpoint_head_tensors, checkpoint_heads, choose_head, dictionary_files, head_config, head_outputs,
    head_problems, head_warnings, keep_only_head, model_heads, task_labels,
)
from .hf_keymap import (
    DICT_COPY, FAIRSEQ_LAYERNORM_EPS, FAIRSEQ_TIED_HEAD, FAIRSEQ_TOKENS, HEAD_MODULES, HF_ARCHITECTURES,
    HF_DECODER_BIAS, HF_TOKEN_TYPE, WEIGHTS_NAME, HeadRef, check_shapes, key_map, reverse_key_map, shape_of,
)
from .hf_tokenizer import TokenizerFiles, build_tokenizer

logger = logging.getLogger(__name__)


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


def _is_exact_gelu(fn) -> bool:
    from fairseq import utils

    return fn is utils.get_activation_fn("gelu") or fn is torch.nn.functional.gelu


def _name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


def inspect_model(model, dictionary, head: Optional[HeadRef] = None) -> ExportLayout:
    """Read the exportable layout of a built fairseq Longformer with ``head`` (None: its LM head);
    raise ValueError naming every setting the HF class cannot represent (and why), before anything
    is written."""
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
    lm_head = model.encoder.lm_head
    hidden = encoder.embed_tokens.weight.shape[1]
    if head is not None:
        problems += head_problems(model, head, hidden)
    elif not _is_exact_gelu(lm_head.activation_fn):
        problems.append(f"--activation-fn: the LM head uses {_name(lm_head.activation_fn)}; HF's Longformer LM head "
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
        raise ValueError(f"cannot export to Hugging Face {HF_ARCHITECTURES[head and head.kind]}, nothing was "
                         "written:\n  - " + "\n  - ".join(problems))

    warnings = []
    others = [h for h in model_heads(model) if h != head]
    if others:
        warnings.append(f"heads {[h.name for h in others]} are not exported (a Hugging Face model carries one head)")
    dropout = float(layers[0].dropout_module.p)
    if head is not None:
        warnings += head_warnings(model, head, dropout)
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
        hidden=hidden,
        ffn=layers[0].fc1.out_features,
        vocab=vocab,
        position_rows=encoder.embed_positions.weight.shape[0],
        padding_idx=dictionary.pad(),
        windows=tuple(windows),
        layer_norm_eps=eps[0] if eps else FAIRSEQ_LAYERNORM_EPS,
        dropout=dropout,
        attention_dropout=float(attention.config.dropout),
        tied=lm_head.weight is encoder.embed_tokens.weight,
        head=head,
        outputs=head_outputs(model, head) if head is not None else 0,
        warnings=warnings,
    )


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
        "attention_window": [2 * w for w in layout.windows],  # TWO-sided, per layer
        "tie_word_embeddings": layout.tied,  # lm_head.weight is embed_tokens.weight
        **head_config(layout.head, layout.outputs, labels),
    }


def _left_out(key: str, mapping: Mapping, layout: ExportLayout) -> bool:
    """fairseq tensors an export leaves out on purpose: version counters, heads other than the one
    exported, and the LM head when a task head is exported."""
    other_head = key.split(".")[0] in HEAD_MODULES.values() and key not in mapping
    return key.endswith(".version") or other_head or (layout.head is not None and key.startswith("encoder.lm_head."))


def fairseq_to_hf_state(state: Mapping[str, Tensor], layout: ExportLayout) -> Dict[str, Tensor]:
    """fairseq state dict -> the tensors of model.safetensors (keys and shapes asserted)."""
    mapping = key_map(layout.num_layers, "longformer", global_projections=True, tied=layout.tied, head=layout.head)
    state = {k: v for k, v in state.items() if not _left_out(k, mapping, layout)}
    if layout.tied and layout.head is None:
        assert torch.equal(state[FAIRSEQ_TIED_HEAD], state[FAIRSEQ_TOKENS]), "tied LM head differs from embeddings"
        state.pop(FAIRSEQ_TIED_HEAD)
    missing = sorted(set(mapping) - set(state))
    unmapped = sorted(set(state) - set(mapping))
    if missing or unmapped:
        raise ValueError(f"fairseq state dict does not match the key map: missing {missing}, unmapped {unmapped}")
    dims = layout.dims()
    check_shapes(state, {fs: shape_of(spec, dims) for fs, (_, spec) in mapping.items()}, "fairseq model")
    out = {hf: state[fs].detach().to("cpu", torch.float32).contiguous().clone() for fs, (hf, _) in mapping.items()}
    # No fairseq counterpart: one zero row adds nothing to any embedding.
    out[HF_TOKEN_TYPE.format(base="longformer")] = torch.zeros(1, layout.hidden)
    if layout.head is None:  # HF's alias of lm_head.bias (tied in HF): written so every HF version finds it.
        out[HF_DECODER_BIAS] = out["lm_head.bias"].clone()
    assert set(out) == set(layout.hf_shapes()), sorted(set(out) ^ set(layout.hf_shapes()))
    return out


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


def export_model(model, dictionary, out_dir, tokenizer: Optional[TokenizerFiles] = None, overwrite: bool = False,
                 head_name: Optional[str] = None, labels: Optional[List[str]] = None) -> ExportResult:
    """Write a built fairseq Longformer (with the task's dictionary, <mask> included) as a Hugging
    Face folder: its task head ``head_name`` (default: its only head) as the HF class for that head,
    a model without heads as LongformerForMaskedLM. ``labels``: a classification head's class names
    in class order. All checks run before anything is written."""
    try:
        from safetensors.torch import save_file
        from transformers import LongformerConfig
    except ImportError as error:
        raise ImportError(f"export needs transformers and safetensors (pip install 'fairseq-longformer[hf]'): "
                          f"{error}") from error
    head = choose_head(model_heads(model), head_name, "the model")
    layout = inspect_model(model, dictionary, head)
    config = hf_config_dict(layout, dictionary, labels)
    tensors = fairseq_to_hf_state(model.state_dict(), layout)
    hf_config = LongformerConfig(**config)
    check_shapes(tensors, layout.hf_shapes(), "exported tensors")
    hf_tokenizer, extra_files = build_tokenizer(tokenizer or TokenizerFiles(), dictionary, layout.max_positions)
    for warning in layout.warnings:
        logger.warning(warning)

    with staged_folder(out_dir, overwrite) as tmp:
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
    out_dir = Path(out_dir).absolute()
    logger.info(f"exported {layout.num_layers} layers, windows (one-sided) {list(layout.windows)} -> HF "
                f"attention_window {config['attention_window']}, as {config['architectures'][0]}, to {out_dir}")
    return ExportResult(out_dir, config, tokenizer.kind if tokenizer else None, layout.warnings)


def _find(what: str, flag: str, given, candidates: List[Path]) -> Path:
    candidates = [Path(given)] if given is not None else list(dict.fromkeys(candidates))
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no {what}: looked for {[str(p) for p in candidates]} (pass {flag})")
    return found


def load_fairseq_checkpoint(checkpoint, dict_path=None, label_dict_path=None, head_name: Optional[str] = None):
    """(model, task, head) from a fairseq Longformer checkpoint through fairseq's own loader (upgrades
    old checkpoints); the model holds exactly the checkpoint's head ``head`` (``head_name``, else the
    only one; None: no head), with the checkpoint's weights.

    The task's dictionaries (dict.txt; input0/dict.txt and label/dict.txt for classification):
    ``dict_path`` / ``label_dict_path``, else next to the checkpoint, else in its --data folder."""
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
    head = choose_head(checkpoint_heads(state["model"]), head_name, f"checkpoint {str(checkpoint)!r}")
    head_tensors = checkpoint_head_tensors(state["model"], head) if head is not None else {}

    roots = [checkpoint.parent] + ([Path(str(cfg.task.data).split(os.pathsep)[0])] if cfg.task.get("data") else [])
    token_dict, label_dict = dictionary_files(cfg.task.get("_name"))
    files = {token_dict: _find("dictionary", "--dict", dict_path,
                               [checkpoint.parent / "dict.txt"] + [root / token_dict for root in roots])}
    if label_dict is not None:
        files[label_dict] = _find("label dictionary", "--label-dict", label_dict_path,
                                  [root / label_dict for root in roots])
    elif label_dict_path is not None:
        raise ValueError(f"--label-dict: the checkpoint's task {cfg.task.get('_name')!r} has no label dictionary")
    with tempfile.TemporaryDirectory() as data:  # the task reads its dictionaries from DATA
        for name, found in files.items():
            os.makedirs(os.path.dirname(os.path.join(data, name)), exist_ok=True)
            shutil.copyfile(found, os.path.join(data, name))
        overwrite_args_by_name(cfg, {"data": data})
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], state=state)
    model = models[0].eval()
    keep_only_head(model, head, head_tensors)
    return model, task, head


def export_checkpoint(checkpoint, out_dir, dict_path=None, tokenizer: Optional[TokenizerFiles] = None,
                      overwrite: bool = False, head_name: Optional[str] = None,
                      label_dict_path=None) -> ExportResult:
    """``longformer-export-hf``: fairseq checkpoint (+ its dictionaries) -> Hugging Face folder."""
    check_output_dir(out_dir, overwrite)  # fail before the slow checkpoint load
    if tokenizer is not None:
        tokenizer.kind  # noqa: B018  (validates the tokenizer flags, same reason)
    model, task, head = load_fairseq_checkpoint(checkpoint, dict_path, label_dict_path, head_name)
    return export_model(model, task.source_dictionary, out_dir, tokenizer, overwrite, labels=task_labels(task, head))
