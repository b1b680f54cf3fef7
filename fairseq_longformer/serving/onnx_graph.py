"""Graph-friendly Longformer attention and the model parts ``longformer-export-onnx`` writes.

transformers' Longformer cannot be exported to ONNX as it is (optimum disabled it): its
attention cuts overlapping chunks with ``as_strided``, branches in Python on the number of
global tokens (``is_global_attn = ....any().item()``) and pads in Python. The modules here run
the SAME transformers submodules (embeddings, projections, layer norms, feed-forward, heads) and
replace only the attention and the padding, with operations whose shapes are symbolic:

* Padding to the window multiple happens in the graph: the length is padded to a multiple of
  P = lcm of the layers' one-sided windows w (pad id, attention 0, global 0) and cut back at the end.
* Band: queries in chunks of w; chunk c sees the keys of chunks c-1, c, c+1 (3w keys, made with
  a pad and three slices concatenated: no ``as_strided``), masked to |i - j| <= w, padding and
  global keys out. 1.5x the band's exact work, memory linear in N.
* Global tokens: their count G is a data-dependent size (``nonzero`` of "slot < most global
  tokens in a row"), their positions the first G of a top-k on (is_global, -position): no Python
  branch, G = 0 gives empty tensors. Every query also scores the G global keys (local k, v)
  under one softmax with its band; the global rows are recomputed with the global projections
  over every non-padding key and scattered back.
* Padding rows are zero, as transformers' are.

Shapes: input_ids, attention_mask, global_attention_mask (B, N); hidden (B, N, C); per head
(B, H, N, D); M = N padded; Nc = M / w chunks.
"""
import math
from functools import reduce
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class GlobalIndex(nn.Module):
    """From is_global (B, M) bool: positions (B, G) of each row's global tokens in ascending
    order, then fillers, and used (B, G) bool; G = the largest count (data-dependent)."""

    def forward(self, is_global: Tensor):
        length = is_global.shape[1]
        arange = torch.arange(length, device=is_global.device)
        counts = is_global.long().sum(1)
        slots = torch.nonzero(arange < counts.max()).squeeze(1)  # (G,) = 0 .. G-1
        key = is_global.long() * (2 * length) + (length - 1 - arange)  # globals first, by position
        order = torch.topk(key, length, dim=1).indices
        positions = order.index_select(1, slots)
        used = slots[None, :] < counts[:, None]
        return positions, used


def _heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """(B, M, C) -> (B, H, M, D). No -1 in the shape: ONNX's Reshape cannot infer it when M is 0
    (no global token)."""
    return x.reshape(x.shape[0], x.shape[1], heads, head_dim).transpose(1, 2)


def _chunks3(x: Tensor, w: int) -> Tensor:
    """(..., M, X) -> (..., M / w, 3w, X): for chunk c the rows of chunks c-1, c, c+1 (zeros
    outside), by padding and three slices, no strided view."""
    padded = F.pad(x, (0, 0, w, w))
    blocks = padded.reshape(*x.shape[:-2], x.shape[-2] // w + 2, w, x.shape[-1])
    return torch.cat([blocks[..., :-2, :, :], blocks[..., 1:-1, :, :], blocks[..., 2:, :, :]], dim=-2)


class GraphSelfAttention(nn.Module):
    """transformers' ``LongformerSelfAttention`` / ``LEDEncoderSelfAttention`` (its six
    projections, used as they are) with graph-friendly attention."""

    def __init__(self, stock: nn.Module):
        super().__init__()
        self.stock = stock
        self.heads, self.head_dim = stock.num_heads, stock.head_dim
        self.window = stock.one_sided_attn_window_size

    def forward(self, x: Tensor, padding: Tensor, is_global: Tensor, positions: Tensor, used: Tensor) -> Tensor:
        """x (B, M, C), M a multiple of w; padding, is_global (B, M) bool; positions, used (B, G)."""
        s, w, heads = self.stock, self.window, self.heads
        batch, length, width = x.shape
        scale = 1.0 / math.sqrt(self.head_dim)
        q = _heads(s.query(x) * scale, heads, self.head_dim)
        k, v = _heads(s.key(x), heads, self.head_dim), _heads(s.value(x), heads, self.head_dim)
        lowest = torch.finfo(x.dtype).min

        # band: (B, H, Nc, w, 3w) scores of chunk c's queries against chunks c-1, c, c+1
        chunks = length // w
        qc = q.reshape(batch, heads, chunks, w, self.head_dim)
        band = torch.matmul(qc, _chunks3(k, w).transpose(-1, -2))
        key_ok = _chunks3((~(padding | is_global)).to(x.dtype).unsqueeze(-1), w).squeeze(-1) > 0  # (B, Nc, 3w)
        offset = torch.arange(3 * w, device=x.device)[None, :] - w - torch.arange(w, device=x.device)[:, None]
        allowed = (offset.abs() <= w)[None, None, None] & key_ok[:, None, :, None, :]
        band = band.masked_fill(~allowed, lowest).reshape(batch, heads, length, 3 * w)

        # every query also attends the G global keys, with the local projections
        index = positions[:, None, :, None].expand(batch, heads, positions.shape[1], self.head_dim)
        k_glob, v_glob = torch.gather(k, 2, index), torch.gather(v, 2, index)  # (B, H, G, D)
        glob = torch.matmul(q, k_glob.transpose(-1, -2)).masked_fill(~used[:, None, None, :], lowest)
        probs = torch.softmax(torch.cat([band, glob], dim=-1), dim=-1)
        band_probs = probs[..., :3 * w].reshape(batch, heads, chunks, w, 3 * w)
        out = torch.matmul(band_probs, _chunks3(v, w)).reshape(batch, heads, length, self.head_dim)
        out = out + torch.matmul(probs[..., 3 * w:], v_glob)
        out = out.transpose(1, 2).reshape(batch, length, width)

        # the global rows: every non-padding key with the global projections
        rows = torch.gather(x, 1, positions[:, :, None].expand(batch, positions.shape[1], width))
        q_g = _heads(s.query_global(rows) * scale, heads, self.head_dim)  # (B, H, G, D)
        scores = torch.matmul(q_g, _heads(s.key_global(x), heads, self.head_dim).transpose(-1, -2))  # (B, H, G, M)
        scores = scores.masked_fill(padding[:, None, None, :], lowest)
        values = torch.matmul(torch.softmax(scores, dim=-1), _heads(s.value_global(x), heads, self.head_dim))
        values = values.transpose(1, 2).reshape(batch, positions.shape[1], width)
        # unused slots write into an extra row that is dropped
        target = torch.where(used, positions, torch.full_like(positions, length))
        out = torch.cat([out, out.new_zeros(batch, 1, width)], dim=1)
        out = out.scatter(1, target[:, :, None].expand(batch, target.shape[1], width), values)[:, :length]
        return out.masked_fill(padding[:, :, None], 0.0)


def window_multiple(windows: List[int]) -> int:
    """P: the padded length is a multiple of every layer's one-sided window."""
    return reduce(lambda a, b: a * b // math.gcd(a, b), windows, 1)


class _PaddedInputs(nn.Module):
    """Pads (B, N) inputs to a multiple of P inside the graph; merges the masks as transformers'
    LongformerModel and LEDEncoder do: m = attention_mask * (global_attention_mask + 1), then m <= 0
    is padding, m = 1 a local token, m >= 2 a global one. So attention_mask = 2 (the original
    Longformer API's "global") is global here too, and a padding token is never global."""

    def __init__(self, multiple: int, pad_id: int):
        super().__init__()
        self.multiple, self.pad_id = multiple, pad_id

    def forward(self, input_ids, attention_mask, global_attention_mask):
        length = input_ids.shape[1]
        extra = (self.multiple - length % self.multiple) % self.multiple
        ids = F.pad(input_ids, (0, extra), value=self.pad_id)
        merged = F.pad(attention_mask * (global_attention_mask + 1), (0, extra), value=0)
        return ids, merged <= 0, merged >= 2


class LongformerGraph(nn.Module):
    """A transformers ``LongformerFor{MaskedLM,SequenceClassification,QuestionAnswering}`` as one
    graph: (input_ids, attention_mask, global_attention_mask) -> its head's outputs
    (logits (B, N, V); logits (B, L); start_logits, end_logits (B, N))."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        body = model.longformer
        self.attentions = nn.ModuleList(GraphSelfAttention(layer.attention.self) for layer in body.encoder.layer)
        self.inputs = _PaddedInputs(window_multiple([a.window for a in self.attentions]), model.config.pad_token_id)
        self.global_index = GlobalIndex()
        self.head = type(model).__name__

    def forward(self, input_ids, attention_mask, global_attention_mask):
        length = input_ids.shape[1]
        ids, padding, is_global = self.inputs(input_ids, attention_mask, global_attention_mask)
        positions, used = self.global_index(is_global)
        body = self.model.longformer
        x = body.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        for layer, attention in zip(body.encoder.layer, self.attentions):
            x = layer.attention.output(attention(x, padding, is_global, positions, used), x)
            x = layer.output(layer.intermediate(x), x)
        x = x[:, :length]
        if self.head == "LongformerForMaskedLM":
            return self.model.lm_head(x)
        if self.head == "LongformerForSequenceClassification":
            return self.model.classifier(x)
        start, end = self.model.qa_outputs(x).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)


class LEDEncoderGraph(nn.Module):
    """The encoder of a transformers ``LEDForConditionalGeneration`` / ``LEDModel`` as one graph:
    (input_ids, attention_mask, global_attention_mask) -> last_hidden_state (B, N, C)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.encoder = model.get_encoder()
        self.attentions = nn.ModuleList(GraphSelfAttention(layer.self_attn.longformer_self_attn)
                                        for layer in self.encoder.layers)
        self.inputs = _PaddedInputs(window_multiple([a.window for a in self.attentions]), model.config.pad_token_id)
        self.global_index = GlobalIndex()

    def forward(self, input_ids, attention_mask, global_attention_mask):
        length = input_ids.shape[1]
        ids, padding, is_global = self.inputs(input_ids, attention_mask, global_attention_mask)
        positions, used = self.global_index(is_global)
        encoder = self.encoder
        x = encoder.embed_tokens(ids) + encoder.embed_positions(ids.shape)
        x = encoder.layernorm_embedding(x)
        for layer, attention in zip(encoder.layers, self.attentions):
            x = layer.self_attn_layer_norm(x + layer.self_attn.output(attention(x, padding, is_global, positions, used)))
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        return x[:, :length]
