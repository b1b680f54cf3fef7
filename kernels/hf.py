"""This package's attention inside a loaded Hugging Face Longformer or LED: ``accelerate(model)``.

transformers' ``LongformerSelfAttention`` and ``LEDEncoderSelfAttention`` run the chunked
attention of the original release (``_sliding_chunks_query_key_matmul`` over overlapping
``as_strided`` chunks, global keys concatenated to every row's scores). ``accelerate`` replaces
each of those modules, in place, by ``AcceleratedSelfAttention``: the SAME six projection
modules (``query``, ``key``, ``value``, ``query_global``, ``key_global``, ``value_global``)
under the same names, so the state dict, ``save_pretrained`` and ``from_pretrained`` are
unchanged, and ``longformer_attention`` (the PyTorch path on CPU, Triton on CUDA: ``impl``)
computes the attention.

Semantics are transformers' (read in modeling_longformer.py, transformers 5.x), which are this
package's (``pattern.py``): layer l attends a one-sided window ``attention_window[l] // 2``; the
encoder's float mask is < 0 at padding, > 0 at global tokens (a padding token is never global);
local rows attend the window and every global key with the local projections, global rows every
non-padding key with the global ones; padding rows are zero. The encoder has already padded the
input to the window multiple. ``output_attentions=True`` runs the stock module (same weights):
the PyTorch path does not materialise the probabilities.

Shapes: hidden_states (B, N, C); q, k, v (B, H, N, D); masks (B, N). This module imports only
torch at import time; transformers is never imported here (the modules are recognised by their
class names).
"""
from typing import Optional

import torch
from torch import Tensor, nn

from .api import IMPLEMENTATIONS, longformer_attention
from .dropout import AttentionDropout

__all__ = ["AcceleratedSelfAttention", "accelerate", "restore"]
from .pattern import AttentionMasks, AttentionPattern, default_scale

# transformers' self-attention classes this module stands in for (by class name: no import)
STOCK_CLASSES = ("LongformerSelfAttention", "LEDEncoderSelfAttention")
PROJECTIONS = ("query", "key", "value", "query_global", "key_global", "value_global")


class _SharedMasks:
    """One ``AttentionMasks`` per forward for every layer: transformers hands each layer the same
    mask tensor, so the host syncs and global index lists are made by the first layer only."""

    def __init__(self):
        self._key = None
        self._masks = None

    def get(self, attention_mask: Tensor) -> AttentionMasks:
        key = (attention_mask, attention_mask._version)
        if self._key is None or self._key[0] is not key[0] or self._key[1] != key[1]:
            # transformers' encoder mask: < 0 padding, > 0 global, 0 local
            self._masks = AttentionMasks(padding=attention_mask < 0, is_global=attention_mask > 0)
            self._key = key
        return self._masks


class AcceleratedSelfAttention(nn.Module):
    """transformers' Longformer/LED encoder self-attention, computed by ``longformer_attention``.

    Holds the stock module's six projections under their names (the state dict is the stock
    one) and keeps the stock module, unregistered, for ``output_attentions=True`` and ``stock()``.
    """

    def __init__(self, stock: nn.Module, impl: str = "auto", shared: Optional[_SharedMasks] = None):
        super().__init__()
        if impl not in IMPLEMENTATIONS:
            raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
        for name in PROJECTIONS:
            setattr(self, name, getattr(stock, name))
        self.num_heads, self.head_dim, self.embed_dim = stock.num_heads, stock.head_dim, stock.embed_dim
        self.dropout, self.layer_id, self.config = stock.dropout, stock.layer_id, stock.config
        self.one_sided_attn_window_size = stock.one_sided_attn_window_size
        self.pattern = AttentionPattern(window=self.one_sided_attn_window_size)
        self.impl = impl
        self.training = stock.training
        self._stock = (stock,)  # a tuple: not a submodule, so not in the state dict twice
        self._shared = shared if shared is not None else _SharedMasks()

    def stock(self) -> nn.Module:
        """The transformers module this one replaced (same projection modules), in this one's mode."""
        stock = self._stock[0]
        stock.train(self.training)
        return stock

    def _heads(self, x: Tensor) -> Tensor:
        """(B, N, C) -> (B, H, N, D)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def _global_rows(self, x: Tensor, masks: AttentionMasks) -> Tensor:
        """The global tokens' rows (B, G, C), slot g of row b for its global token: each attends
        every non-padding key with the global projections (transformers'
        ``_compute_global_attn_output_from_hidden``). x: (B, N, C). An unused slot gets position
        0's query; ``put_global_rows`` drops its row."""
        batch, length, _ = x.shape
        tokens = x[torch.arange(batch, device=x.device)[:, None], masks.global_index]  # (B, G, C)
        queries = self.query_global(tokens) * default_scale(self.head_dim)
        queries = queries.view(batch, masks.max_global, self.num_heads, self.head_dim)
        keys, values = self._heads(self.key_global(x)), self._heads(self.value_global(x))
        scores = torch.matmul(queries.transpose(1, 2), keys.transpose(2, 3)).float()  # (B, H, G, N)
        if masks.padding is not None:
            scores = scores.masked_fill(masks.padding[:, None, None, :], torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1).to(x.dtype)
        probs = nn.functional.dropout(probs, p=self.dropout, training=self.training)
        out = torch.matmul(probs, values)  # (B, H, G, D)
        return out.transpose(1, 2).reshape(batch, masks.max_global, self.embed_dim)

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,
                is_global_attn=None, output_attentions=False):
        """hidden_states (B, N, C), N a multiple of the window; attention_mask (B, N) float as
        the encoder makes it. Returns ``(out,)`` with out (B, N, C), as the stock module."""
        if output_attentions:
            return self.stock()(hidden_states, attention_mask, is_index_masked, is_index_global_attn,
                                is_global_attn, output_attentions)
        batch, length, _ = hidden_states.shape
        if attention_mask is None:
            masks = AttentionMasks()
        else:
            masks = self._shared.get(attention_mask)
        dropout = None
        if self.training and self.dropout > 0:
            dropout = AttentionDropout(self.dropout, int(torch.randint(0, 2 ** 31 - 1, (1,))))
        q, k, v = (self._heads(p(hidden_states)) for p in (self.query, self.key, self.value))
        # The global rows are computed below with the global projections: the call skips them.
        out = longformer_attention(q, k, v, None, None, None, self.pattern, masks, impl=self.impl,
                                   global_rows=False, dropout=dropout)
        out = out.transpose(1, 2).reshape(batch, length, self.embed_dim)
        if masks.is_global is not None:
            out = masks.put_global_rows(out, self._global_rows(hidden_states, masks))
        return (out,)


def accelerate(model: nn.Module, impl: str = "auto") -> nn.Module:
    """Swap every transformers ``LongformerSelfAttention`` / ``LEDEncoderSelfAttention`` in
    ``model`` (a loaded ``Longformer*`` or ``LED*`` model, or any module holding them) for
    ``AcceleratedSelfAttention``, in place; returns ``model``. Weights are untouched (the same
    parameter objects, the same state-dict keys). ``impl``: auto (Triton on CUDA, the PyTorch path
    elsewhere), torch, triton, reference. Raises ValueError when the model has no such module."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
    shared = _SharedMasks()
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ in STOCK_CLASSES:
                setattr(parent, name, AcceleratedSelfAttention(child, impl, shared))
                swapped += 1
            elif isinstance(child, AcceleratedSelfAttention):
                child.impl = impl
                child._shared = shared
                swapped += 1
    if not swapped:
        raise ValueError(f"{type(model).__name__} holds no transformers LongformerSelfAttention or "
                         "LEDEncoderSelfAttention: accelerate takes a Longformer* or LED* model")
    return model


def restore(model: nn.Module) -> nn.Module:
    """Undo ``accelerate``: put the stock transformers modules back (same weights); returns ``model``."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, AcceleratedSelfAttention):
                setattr(parent, name, child.stock())
    return model
