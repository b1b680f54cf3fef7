"""What every conversion shares: windows (one-sided w, HF's 2w), config rules, position tiling, key tables, renames."""
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from fairseq import utils
from torch import Tensor

DICT_COPY = "fairseq_dict.txt"  # the fairseq dictionary, written by export, read by import
PLACEHOLDER = "hf:{}"  # dict.txt symbol for HF id k when no fairseq dictionary came along
UNCHECKED = object()  # a config rule's default: an entry config.json lacks is not checked
QKV = (("q", "query"), ("k", "key"), ("v", "value"))  # fairseq's projection -> HF's
LAYER_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                 "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm")  # a fairseq transformer layer's
CROSS_MODULES = tuple(f"encoder_attn.{m}_proj" for m in "qkv") + ("encoder_attn.out_proj", "encoder_attn_layer_norm")


def hf_libraries(what: str):
    """transformers (with safetensors), or ImportError naming the fix: the Hugging Face side needs both."""
    try:
        import safetensors.torch  # noqa: F401
        import transformers
    except ImportError as error:
        raise ImportError(f"{what} needs transformers and safetensors (pip install 'fairseq-longformer[hf]'): "
                          f"{error}") from error
    return transformers


def window_problems(windows: Sequence[int], layer_label: str = "layer") -> List[str]:
    """What keeps one-sided ``windows`` from being an HF ``attention_window`` (empty: exportable)."""
    problems = [f"--attention-window: {layer_label} {i}: window {w} (w = {w}; HF's attention_window, 2w, must be "
                "a positive even number, so w = 0 has no HF equivalent)" for i, w in enumerate(windows) if w < 1]
    if windows and not problems and any((2 * max(windows)) % (2 * w) for w in windows):
        problems.append(
            f"--attention-window {','.join(map(str, windows))}: HF pads every input to a multiple of the largest "
            f"attention_window ({2 * max(windows)}) and each layer needs the length to be a multiple of its own "
            f"(2w = {', '.join(str(2 * w) for w in windows)}); per-layer windows must each divide the largest")
    return problems


def from_hf_windows(value, layers: int) -> Tuple[Optional[Tuple[int, ...]], Optional[str]]:
    """HF's ``attention_window`` (one two-sided value or one per layer) -> (w per layer, None) or (None, problem)."""
    values = value if isinstance(value, list) else [value] * layers
    if len(values) != layers or any(isinstance(v, bool) or not isinstance(v, int) or v < 2 or v % 2 for v in values):
        return None, (f"attention_window = {value!r}: expected a positive even number (two-sided) or one per "
                      f"layer ({layers})")
    return tuple(v // 2 for v in values), None


def rule_problems(config: Mapping, rules) -> List[str]:
    """"name = value: why" for each rule (name, default, ok, why) ``config`` breaks, in table order."""
    return [f"{name} = {config.get(name, default)!r}: {why}" for name, default, ok, why in rules
            if (name in config or default is not UNCHECKED) and not ok(config.get(name, default))]


def is_exact_gelu(fn) -> bool:
    """Whether a fairseq activation is the erf GELU that HF's "gelu" computes."""
    return fn is utils.get_activation_fn("gelu") or fn is torch.nn.functional.gelu


def stack_problems(label: str, stack, hf: str, longformer_layers: bool = True) -> List[str]:
    """What ``hf`` (a HF class) cannot hold of a fairseq encoder or decoder ``stack``, one line each
    (``longformer_layers``: its layers' windows must be undilated, two-sided, with global projections)."""
    problems = []
    for i, layer in enumerate(stack.layers):
        where, attention = f"{label} layer {i}", layer.self_attn
        config = getattr(attention, "config", None) if longformer_layers else None
        if longformer_layers and config is None:
            problems.append(f"{where}: self-attention is {type(attention).__name__}, not LongformerSelfAttention")
        elif config is not None:
            per_head = config.pattern.dilation_per_head(attention.num_heads)
            if len(set(per_head)) > 1:
                problems.append(f"--attention-dilation: {where} uses a different dilation per head "
                                f"({':'.join(map(str, per_head))}); {hf} applies one undilated window to every head")
            elif per_head[0] > 1:
                problems.append(f"--attention-dilation: {where}: dilation {per_head[0]} ({hf} has no dilated "
                                "attention)")
            if config.pattern.causal:
                problems.append(f"--attention-causal: {where} is causal; {hf}'s sliding window is two-sided")
            if not config.global_projections:
                problems.append(f"{where}: no global projections ({hf} always has them)")
        if getattr(layer, "normalize_before", False):
            problems.append(f"--{label}-normalize-before: {where} is pre-LN; {hf} is post-LN")
        if not is_exact_gelu(layer.activation_fn):
            problems.append(f"--activation-fn: {where} uses {getattr(layer.activation_fn, '__name__', '?')}; only "
                            "exact GELU ('gelu') is exportable")
    if stack.layer_norm is not None:
        problems.append(f"--{label}-normalize-before: the {label} ends in a final layer norm; {hf} has none")
    if stack.layernorm_embedding is None:
        problems.append(f"--layernorm-embedding is off: {hf} always normalizes the {label}'s embeddings")
    if float(stack.embed_scale) != 1.0:
        problems.append(f"--no-scale-embedding is off: the {label}'s embeddings are scaled by "
                        f"{float(stack.embed_scale):g}; {hf} does not scale them")
    if not isinstance(stack.embed_positions, torch.nn.Embedding):
        problems.append(f"the {label}'s positions are {type(stack.embed_positions).__name__}; {hf} has learned "
                        "positions only")
    return problems


def check_extendable(source_positions: int, target_positions: int) -> None:
    """Positions are only ever extended (a shorter table would drop learned positions)."""
    if target_positions < source_positions:
        raise ValueError(f"--max-positions {target_positions} is smaller than the source model's "
                         f"{source_positions} positions: positions can only be extended")


def extend_positions(weight: Tensor, target_positions: int, padding_idx: int = 1,
                     init: str = "copy", generator: torch.Generator = None) -> Tensor:
    """(P_s + padding_idx + 1, C) -> (P_t + padding_idx + 1, C): learned rows tiled ("copy") or N(0, 0.02)."""
    reserved = padding_idx + 1
    source_positions = weight.shape[0] - reserved
    if source_positions <= 0:
        raise ValueError(f"position table of {weight.shape[0]} rows has no learned rows "
                         f"beyond the {reserved} reserved ones")
    check_extendable(source_positions, target_positions)
    if init == "copy":
        new = weight[reserved:].repeat(-(-target_positions // source_positions), 1)[:target_positions]
    elif init == "random":
        new = torch.empty(target_positions, weight.shape[1], dtype=weight.dtype).normal_(0.0, 0.02, generator=generator)
    else:
        raise ValueError(f"position init must be 'copy' or 'random', got {init!r}")
    return torch.cat([weight[:reserved], new.to(weight.dtype)], dim=0)


def shape_of(spec: Sequence[str], dims: Mapping[str, int]) -> Tuple[int, ...]:
    """A symbolic shape such as ("V", "C") in numbers."""
    return tuple(int(dims[d]) for d in spec)


def check_shapes(tensors: Mapping[str, Tensor], expected: Mapping[str, Tuple[int, ...]], what: str) -> None:
    wrong = [f"{k}: {tuple(tensors[k].shape)} (expected {shape})" for k, shape in expected.items()
             if tuple(tensors[k].shape) != shape]
    if wrong:
        raise ValueError(f"{what}: tensors with unexpected shapes: " + "; ".join(wrong))


def table_keys(rows, layers: Mapping[str, int], **names) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """fairseq key -> (HF key, shape) from rows (fairseq module, HF module, weight shape, bias shape or None),
    a row naming stack ``{s}`` of ``layers`` repeated per layer."""
    out: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
    for fs, hf, weight, bias in rows:
        stack = next((s for s in layers if "{" + s + "}" in fs), None)
        for i in range(layers[stack]) if stack else [0]:
            fill = {**names, **({stack: i} if stack else {})}
            for part, shape in (("weight", weight), ("bias", bias)):
                if shape is not None:
                    out[f"{fs.format(**fill)}.{part}"] = (f"{hf.format(**fill)}.{part}", shape)
    assert len({hf for hf, _ in out.values()}) == len(out), "the key table maps two tensors to one name"
    return out


def renamed(state: Mapping[str, Tensor], mapping: Mapping[str, str], what: str, ignored=()) -> Dict[str, Tensor]:
    """``state`` under ``mapping``'s names; ValueError naming missing and unexpected keys (but ``ignored``)."""
    missing = sorted(set(mapping) - set(state))
    unexpected = sorted(set(state) - set(mapping) - set(ignored))
    if missing or unexpected:
        raise ValueError(f"{what}: missing {missing[:12]}, unexpected {unexpected[:12]}")
    return {new: state[key] for key, new in mapping.items()}


def filled_from(state: Mapping[str, Tensor], template: Mapping[str, Tensor], builder_owns, what: str):
    """``state`` + the tensors the builder fills (``builder_owns``), checked to be exactly the model's."""
    out = {**{k: v for k, v in template.items() if k not in state and builder_owns(k)}, **state}
    renamed(out, {key: key for key in template}, f"{what} does not fill the fairseq model")
    check_shapes(out, {k: tuple(v.shape) for k, v in template.items()}, what)
    return out


def load_into_hf(hf_model, tensors: Mapping[str, Tensor], hf_owned, what: str) -> None:
    """Fill a built transformers model with exactly its tensors and shapes, but ``hf_owned`` (tied copies, buffers)."""
    expected = {k: tuple(v.shape) for k, v in hf_model.state_dict().items() if k not in hf_owned}
    renamed(tensors, {key: key for key in expected}, f"exported tensors do not fit {what}")
    check_shapes(tensors, expected, f"exported tensors for {what}")
    hf_model.load_state_dict(dict(tensors), strict=False)
