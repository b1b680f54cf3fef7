"""The Longformer attention pattern, defined once for every implementation.

Shape legend (used by every file of the attention core, ``kernels/``):
    B  batch size            H  attention heads
    N  sequence length       D  head dimension
    G  global tokens in the row with the most of them

Semantics (the reference implementation is the executable form of this text):
    * ``window`` w is ONE-sided. A non-global query i attends, with the local q, k, v, to
      keys j = i + t*d for -w <= t <= w (causal: -w <= t <= 0), where d is the head's
      dilation, and to every global token. A key that is global is counted once.
      Hugging Face's ``attention_window`` is two-sided (2w); convert only at export.
    * A global query attends to every non-padding key with q_g, k_g, v_g. Global attention is
      symmetric by definition, so it has no causal meaning: a causal pattern with a global
      token is refused (ValueError), since every earlier token would see the global one.
    * Padding is never attended; a padding position is never global and its output row is
      zero. A row with nothing to attend to gives zeros, never NaN.
    * Scores are ``scale * q.k`` (scale defaults to D ** -0.5) and the softmax always runs in
      fp32, whatever the input dtype: fp16 scores overflow late in training (paper, sec. 3.2).
    * Band bias (``band_bias``, optional): a (B, H, N, W) tensor added to the scores of the
      window keys, for positional terms that depend on the query and the relative distance
      only (Transformer-XL's (q_i + v) . W_R r_{i-j}). Column c of row i is the key
          causal:     W = w + 1,   j = i - c * d                (c = 0 is the query itself)
          two-sided:  W = 2w + 1,  j = i + (c - w) * d          (c = w is the query itself)
      with d the head's dilation, and that key's score becomes
      ``scale * q_i . k_j + band_bias[b, h, i, c]`` (added in fp32, before the fp32 softmax).
      Global keys and the global tokens' own rows get no bias; a column whose key is outside
      [0, N), padding or global is ignored: its value never matters (not even NaN) and its
      gradient is zero, as is the gradient of every row that is not a local query. The bias
      has q's dtype and device and is differentiable (its gradient is dS, the gradient of the
      pre-softmax score, at the band positions). ``check_band_bias`` validates it.
    * Attention dropout (``dropout.py``), when given, drops probability (b, h, i, j) where a pure
      function of (seed, b, h, i, j) says so and scales the kept ones by 1 / (1 - p), after the
      softmax (the normaliser counts every allowed key), in every implementation alike.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, Optional, Sequence, Tuple

import torch
from torch import Tensor


@dataclass(frozen=True)
class AttentionPattern:
    """Static part of the pattern for one layer: window, per-head dilation, causality."""

    window: int
    dilation: Tuple[int, ...] = (1,)  # one value for all heads, or one per head
    causal: bool = False

    def __post_init__(self):
        if not isinstance(self.window, int) or self.window < 0:
            raise ValueError(f"window must be an int >= 0 (one-sided), got {self.window!r}")
        dilation = tuple(int(d) for d in self.dilation)
        if not dilation or any(d < 1 for d in dilation):
            raise ValueError(f"dilation must be one or more ints >= 1, got {self.dilation!r}")
        object.__setattr__(self, "dilation", dilation)

    def dilation_per_head(self, num_heads: int) -> Tuple[int, ...]:
        """The dilation of each of ``num_heads`` heads."""
        if len(self.dilation) == 1:
            return self.dilation * num_heads
        if len(self.dilation) != num_heads:
            raise ValueError(
                f"dilation gives {len(self.dilation)} values but the layer has {num_heads} heads: "
                "give one value for all heads or exactly one per head"
            )
        return self.dilation


@dataclass(frozen=True)
class AttentionMasks:
    """Dynamic, per-batch part of the pattern, with the facts every layer needs computed once.

    Built from raw masks, ``AttentionMasks(padding, is_global)``, once per forward (by the
    encoder), then handed to every layer: the host syncs that decide "no padding" / "no global
    token" and size the global tensors happen here and nowhere else.

    padding: (B, N) bool, True where the position is padding; None when nothing is padding.
    is_global: (B, N) bool, True where a non-padding token has global attention; None when no
        token is global. Global flags on padding positions are dropped (padding wins).
    max_global_tokens: None, or an int the caller knows on the host (a collater, while it
        batches) that bounds every row's global count: G is then this bound (at most N) instead
        of the largest count read from the device: the global tokens cost no host sync, and a
        compiled graph does not break here. A row with more global tokens is an error (checked
        on the device, without a sync: on a GPU it surfaces as a device-side assert).
    Derived (None / 0 without global tokens):
    global_index: (B, G) long, each row's global positions in ascending order, then zeros.
    global_count: (B,) long, the number of global tokens of each row.
    global_slot_used: (B, G) bool, slot g of row b holds a global token (g < count).
    global_rows, global_slots, global_positions: (K,) long, the batch row, slot and position of
        each of the K global tokens (global_positions = global_index[global_rows, global_slots]);
        None under ``max_global_tokens`` (K is data-dependent: ``put_global_rows`` does without).
    max_global: G, the width of the global tensors (a Python int): the largest count, or the
        bound.

    Inside ``torch.compile`` nothing is read to the host when the bound is given: the padding
    mask is kept even when nothing is padding (masking with an all-False mask changes nothing),
    and without global tokens (is_global None, or a bound of 0) nothing about them is derived.
    Without the bound, global tokens still need the host read of the largest count.
    """

    padding: Optional[Tensor] = None
    is_global: Optional[Tensor] = None
    max_global_tokens: Optional[int] = None
    global_index: Optional[Tensor] = field(default=None, init=False, repr=False)
    global_count: Optional[Tensor] = field(default=None, init=False, repr=False)
    global_slot_used: Optional[Tensor] = field(default=None, init=False, repr=False)
    global_rows: Optional[Tensor] = field(default=None, init=False, repr=False)
    global_slots: Optional[Tensor] = field(default=None, init=False, repr=False)
    global_positions: Optional[Tensor] = field(default=None, init=False, repr=False)
    max_global: int = field(default=0, init=False)
    shape: Optional[Tuple[int, ...]] = field(default=None, init=False, repr=False)  # of the raw masks
    # what implementations derive from the masks once per forward for every layer (``derived``)
    _derived: Dict[Hashable, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        padding, is_global, bound = self.padding, self.is_global, self.max_global_tokens
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
            raise ValueError(f"max_global_tokens must be an int >= 0 bounding every row's global count "
                             f"(or None to read the largest count), got {bound!r}")
        if padding is not None and is_global is not None and padding.shape != is_global.shape:
            raise ValueError(f"padding mask {tuple(padding.shape)} and global mask "
                             f"{tuple(is_global.shape)} must have the same shape (B, N)")
        raw = padding if padding is not None else is_global
        object.__setattr__(self, "shape", None if raw is None else tuple(raw.shape))
        if padding is not None:
            padding = padding.bool()
            # Eager: one host read, so that batches without padding skip every padding mask. A
            # compiled graph cannot branch on the device's data: it keeps the mask instead.
            if not torch.compiler.is_compiling() and not bool(padding.any()):
                padding = None
        if is_global is not None:
            is_global = is_global.bool()
            if padding is not None:
                is_global = is_global & ~padding
            is_global = self._index_global_tokens(is_global, bound)
        object.__setattr__(self, "padding", padding)
        object.__setattr__(self, "is_global", is_global)

    def _index_global_tokens(self, is_global: Tensor, bound: Optional[int]) -> Optional[Tensor]:
        """Set the derived global fields from the (B, N) mask; return it, or None when G is 0."""
        counts = is_global.sum(dim=1)
        length = is_global.shape[1]
        if bound is None:
            # the exact largest count: one host read (a graph break under torch.compile)
            most = int(counts.max()) if counts.numel() else 0
        else:
            most = min(bound, length)
            if most < length and counts.numel():
                torch._assert_async(counts.max() <= most, f"a row has more global tokens than "
                                    f"max_global_tokens={bound}: pass the batch's largest global count")
        if most == 0:
            return None
        # a stable sort puts each row's global positions first, in ascending order
        order = torch.argsort((~is_global).to(torch.int8), dim=1, stable=True)[:, :most]
        slot_used = torch.arange(most, device=order.device) < counts[:, None]
        derived = dict(global_index=order.masked_fill(~slot_used, 0), global_count=counts,
                       global_slot_used=slot_used, max_global=most)
        if bound is None:  # the K global tokens listed (nonzero: a host sync, like the count)
            rows, slots = slot_used.nonzero(as_tuple=True)
            derived.update(global_rows=rows, global_slots=slots, global_positions=order[rows, slots])
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        return is_global

    def put_global_rows(self, out: Tensor, values: Tensor) -> Tensor:
        """``out`` (B, N, ...) with the row of each global token replaced by its slot's row of
        ``values`` (B, G, ...), out of place. Unused slots of ``values`` are ignored (any value,
        no gradient)."""
        if self.global_rows is not None:  # the K tokens listed: one index_put (one copy of out)
            rows = self.global_rows
            return out.index_put((rows, self.global_positions), values[rows, self.global_slots])
        # Under a static bound K is unknown: all B * G slots are added into a copy of out with
        # the global rows cleared (the one copy, in out's memory layout as index_put's: the
        # layers' matmuls then round alike), each unused slot adding an exact zero (to its row's
        # position 0, whatever it holds, and taking no gradient).
        trailing = (1,) * (out.dim() - 2)
        values = values.masked_fill(~self.global_slot_used.view(*self.global_slot_used.shape, *trailing), 0)
        cleared = out.clone(memory_format=torch.preserve_format)
        cleared.masked_fill_(self.is_global.view(*self.is_global.shape, *trailing), 0)
        rows = torch.arange(out.shape[0], device=out.device)[:, None].expand_as(self.global_index)
        return cleared.index_put_((rows, self.global_index), values, accumulate=True)

    def derived(self, key: Hashable, build: Callable[[], object]) -> object:
        """``build()``, made once per ``key`` for these masks: the layers of one forward share
        one AttentionMasks, so what an implementation derives from it (the Triton launchers'
        per-position kinds on a device, say) is made by the first layer and reused by the rest.
        The key must name everything the result depends on besides the masks (shape, device).
        At most 8 results are kept (the shared default ``AttentionMasks()`` sees every shape)."""
        if key not in self._derived:
            if len(self._derived) >= 8:
                self._derived.pop(next(iter(self._derived)))
            self._derived[key] = build()
        return self._derived[key]

    def validate(self, batch: int, length: int) -> None:
        if self.shape is not None and self.shape != (batch, length):
            raise ValueError(f"padding and global masks must have shape (B, N) = {(batch, length)}, "
                             f"got {self.shape}")


def parse_per_layer(spec, num_layers: int, name: str) -> Tuple[int, ...]:
    """Parse '256' or '32,64,...' (one per layer) into a tuple of ``num_layers`` ints."""
    values: Sequence = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    values = [int(v) for v in values]
    if len(values) == 1:
        values = values * num_layers
    if len(values) != num_layers:
        raise ValueError(
            f"--{name} gives {len(values)} values for {num_layers} layers: give one value or one per layer"
        )
    return tuple(values)


def parse_dilation(spec, num_layers: int, num_heads: int) -> Tuple[Tuple[int, ...], ...]:
    """Parse the dilation flag into one tuple of per-head dilations per layer.

    '1' (all layers, all heads), '1,2,...' (per layer), or per layer and head with ':' between
    heads and ',' between layers, e.g. '1:1:2:2,1:1:2:2' for two layers of four heads.
    """
    layers = str(spec).split(",")
    if len(layers) == 1:
        layers = layers * num_layers
    if len(layers) != num_layers:
        raise ValueError(
            f"--attention-dilation gives {len(layers)} layers, the model has {num_layers}: "
            "give one value, one per layer, or per layer 'd1:d2:...' with one value per head"
        )
    parsed = []
    for layer in layers:
        heads = tuple(int(d) for d in layer.split(":"))
        AttentionPattern(window=0, dilation=heads).dilation_per_head(num_heads)  # validates
        parsed.append(heads)
    return tuple(parsed)


def raise_causal_global() -> None:
    """The one error for causal attention with global tokens (pattern, module and model)."""
    raise ValueError(
        "global attention cannot be combined with a causal pattern: a global token attends to and "
        "is attended by every token, so under causal attention every earlier token would see a "
        "later one; drop the global tokens (global_attention_mask) or the causal mode "
        "(--attention-causal)")


# Score of a masked key where a whole row may be masked (global queries, whose batch row can be
# all padding): finite rather than -inf, so such a row gets finite softmax values and gradients
# instead of NaNs that would leak into the backward pass through 0 * NaN.
MASKED_SCORE = -1e30


def default_scale(head_dim: int) -> float:
    return head_dim ** -0.5


def check_inputs(q: Tensor, k: Tensor, v: Tensor, q_g: Optional[Tensor], k_g: Optional[Tensor],
                 v_g: Optional[Tensor], pattern: AttentionPattern, masks: "AttentionMasks",
                 need_global: bool = True) -> Optional[Tensor]:
    """Check the six (B, H, N, D) inputs, the pattern and the masks; return masks.is_global.

    q, k, v must share one shape, dtype and device; so must q_g, k_g, v_g, which may be None
    only when no token is global or ``need_global`` is False (the caller computes the global
    rows). A causal pattern with global tokens is refused. Returns the (B, N) bool global mask,
    or None.
    """
    if q.dim() != 4:
        raise ValueError(f"q must be (B, H, N, D), got shape {tuple(q.shape)}")
    masks.validate(q.shape[0], q.shape[2])
    pattern.dilation_per_head(q.shape[1])  # raises ValueError on a wrong number of dilations
    is_global = masks.is_global
    if pattern.causal and is_global is not None:
        raise_causal_global()
    named = [("k", k), ("v", v)]
    if (is_global is not None and need_global) or q_g is not None:
        named += [("q_g", q_g), ("k_g", k_g), ("v_g", v_g)]
    for name, t in named:
        if t is None:
            raise ValueError(f"{name} is None but some tokens are global: pass the global projections")
        if t.shape != q.shape or t.dtype != q.dtype or t.device != q.device:
            raise ValueError(
                f"{name} must match q in shape, dtype and device: q is {tuple(q.shape)} {q.dtype} "
                f"{q.device}, {name} is {tuple(t.shape)} {t.dtype} {t.device}"
            )
    return is_global


def band_bias_width(pattern: AttentionPattern) -> int:
    """W, the number of band-bias columns: w + 1 (causal) or 2w + 1 (two-sided)."""
    return pattern.window + 1 if pattern.causal else 2 * pattern.window + 1


def check_band_bias(band_bias: Optional[Tensor], q: Tensor, pattern: AttentionPattern) -> None:
    """Raise ValueError unless ``band_bias`` is None or a (B, H, N, W) tensor of q's dtype and
    device, W = ``band_bias_width(pattern)`` (see "Band bias" above)."""
    if band_bias is None:
        return
    batch, heads, length = q.shape[:3]
    expected = (batch, heads, length, band_bias_width(pattern))
    if not isinstance(band_bias, Tensor) or tuple(band_bias.shape) != expected:
        got = tuple(band_bias.shape) if isinstance(band_bias, Tensor) else type(band_bias).__name__
        kind = "causal: W = w + 1" if pattern.causal else "two-sided: W = 2w + 1"
        raise ValueError(f"band_bias must have shape (B, H, N, W) = {expected} ({kind}, "
                         f"w = {pattern.window}), got {got}")
    if band_bias.dtype != q.dtype or band_bias.device != q.device:
        raise ValueError(f"band_bias must have q's dtype and device ({q.dtype}, {q.device}), got "
                         f"{band_bias.dtype}, {band_bias.device}")
