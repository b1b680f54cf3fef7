"""The Longformer attention pattern, defined once for every implementation.

Shape legend (used by every file in this package and in ``kernels/``):
    B  batch size            H  attention heads
    N  sequence length       D  head dimension
    G  global tokens in the row with the most of them

Semantics (the reference implementation is the executable form of this text):
    * ``window`` w is ONE-sided. A non-global query i attends, with the local q, k, v, to
      keys j = i + t*d for -w <= t <= w (causal: -w <= t <= 0), where d is the head's
      dilation, and to every global token. A key that is global is counted once.
      Hugging Face's ``attention_window`` is two-sided (2w); convert only at export.
    * A global query attends to every non-padding key with q_g, k_g, v_g (global rows
      ignore ``causal``: global attention is symmetric by definition).
    * Padding is never attended; a padding position is never global and its output row is
      zero. A row with nothing to attend to gives zeros, never NaN.
    * Scores are ``scale * q.k`` (scale defaults to D ** -0.5) and the softmax always runs in
      fp32, whatever the input dtype: fp16 scores overflow late in training (paper, sec. 3.2).
"""
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

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

    @property
    def is_dilated(self) -> bool:
        return any(d > 1 for d in self.dilation)


@dataclass(frozen=True)
class AttentionMasks:
    """Dynamic, per-batch part of the pattern.

    padding: (B, N) bool, True where the position is padding (or None: no padding).
    is_global: (B, N) bool, True where the token has global attention (or None: none).
    Global flags on padding positions are ignored (padding wins).
    """

    padding: Optional[Tensor] = None
    is_global: Optional[Tensor] = None

    def validate(self, batch: int, length: int) -> None:
        for name in ("padding", "is_global"):
            mask = getattr(self, name)
            if mask is not None and tuple(mask.shape) != (batch, length):
                raise ValueError(
                    f"{name} mask must have shape (B, N) = {(batch, length)}, got {tuple(mask.shape)}"
                )

    def padding_or_none(self) -> Optional[Tensor]:
        """(B, N) bool padding mask, or None when nothing is padding."""
        if self.padding is None or not bool(self.padding.any()):
            return None
        return self.padding.bool()

    def global_or_none(self) -> Optional[Tensor]:
        """(B, N) bool mask of global tokens that are not padding, or None when there are none."""
        if self.is_global is None:
            return None
        is_global = self.is_global.bool()
        if self.padding is not None:
            is_global = is_global & ~self.padding.bool()
        return is_global if bool(is_global.any()) else None


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


# Score of a masked key where a whole row may be masked (global queries, whose batch row can be
# all padding): finite rather than -inf, so such a row gets finite softmax values and gradients
# instead of NaNs that would leak into the backward pass through 0 * NaN.
MASKED_SCORE = -1e30


def default_scale(head_dim: int) -> float:
    return head_dim ** -0.5


def check_inputs(q: Tensor, k: Tensor, v: Tensor, q_g: Optional[Tensor], k_g: Optional[Tensor],
                 v_g: Optional[Tensor], masks: "AttentionMasks", need_global: bool = True) -> Optional[Tensor]:
    """Check the six (B, H, N, D) inputs and the masks; return the effective global mask.

    q, k, v must share one shape, dtype and device; so must q_g, k_g, v_g, which may be None
    only when no token is global or ``need_global`` is False (the caller computes the global
    rows). Returns the (B, N) bool global mask, or None.
    """
    if q.dim() != 4:
        raise ValueError(f"q must be (B, H, N, D), got shape {tuple(q.shape)}")
    masks.validate(q.shape[0], q.shape[2])
    is_global = masks.global_or_none()
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
