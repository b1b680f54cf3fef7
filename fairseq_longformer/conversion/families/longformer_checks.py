"""The Longformer export's checks: every setting HF's classes cannot represent is named (flag and
reason) before anything is written; the HF config's numbers are read from the model
(``ExportLayout``)."""
from typing import List, Optional

import torch

from ..rules import function_name, is_exact_gelu, window_problems
from .longformer import FAIRSEQ_LAYERNORM_EPS, HF_ARCHITECTURES, ExportLayout
from .longformer_heads import HeadRef, head_outputs, head_problems, head_warnings, model_heads


def inspect_model(model, dictionary, head: Optional[HeadRef] = None) -> ExportLayout:
    """Read the exportable layout of a built fairseq Longformer with ``head`` (None: its LM head); raise
    ValueError naming every setting the HF class cannot represent (and why), before anything is written."""
    from fairseq.modules import LearnedPositionalEmbedding

    from ...models.longformer import LongformerModel
    from ...modules.self_attention import LongformerSelfAttention

    if not isinstance(model, LongformerModel):
        raise ValueError(f"expected a fairseq Longformer (model 'longformer'), got {type(model).__name__}: "
                         "convert a RoBERTa checkpoint with longformer-convert-roberta first")
    encoder = model.encoder.sentence_encoder
    layers = list(encoder.layers)
    windows = [layer.self_attn.config.pattern.window for layer in layers
               if isinstance(layer.self_attn, LongformerSelfAttention)]
    problems: List[str] = window_problems(windows)
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
        if getattr(layer, "normalize_before", False):
            problems.append(f"--encoder-normalize-before: layer {i} applies layer norm before attention "
                            "(pre-LN); HF Longformer is post-LN")
        if not is_exact_gelu(layer.activation_fn):
            problems.append(f"--activation-fn: layer {i} uses {function_name(layer.activation_fn)}; only exact GELU "
                            "('gelu') is exportable (HF's LM head hard-codes it)")
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
    elif not is_exact_gelu(lm_head.activation_fn):
        problems.append(f"--activation-fn: the LM head uses {function_name(lm_head.activation_fn)}; HF's Longformer LM head "
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
                         "written: " + "; ".join(problems))

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

