"""The contenders of ``longformer-bench``: the same self-attention function, computed four ways.

Every contender maps input hidden states (B, N, C) to the heads' attention output (B, N, C),
q/k/v (and global q/k/v) projections included: the boundary of Hugging Face's
``LongformerSelfAttention``, whose output projection lives in another module. With
``output_projection=True`` (``--output-projection``) every contender also ends in the output
projection, as a whole attention block does.

  dense   q/k/v (+ global q/k/v) projections, ``F.scaled_dot_product_attention`` over all N keys
          with a boolean (N, N) mask of the same Longformer pattern (band + global columns);
          global rows from a second SDPA with the global projections.
  torch   our LongformerSelfAttention with the vectorized PyTorch path (``impl="torch"``),
          through ``attend`` (everything before its out_proj).
  triton  the same module with the Triton kernel (CUDA only).
  hf      Hugging Face's LongformerSelfAttention (transformers); with the output projection, a
          Linear plays the part of HF's ``LongformerAttention.output.dense``.

All contenders get identical weights (``shared_weights``) and inputs (``make_inputs``), so their
outputs must agree (in eval mode: with attention dropout p > 0 each draws its own masks). With
``Case.dropout`` = p each drops attention probabilities at rate p in training mode (the modules
are built in it): ours through its config's ``dropout``, dense through SDPA's ``dropout_p``, HF
through ``attention_probs_dropout_prob``.
"""
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from longformer_kernels import AttentionMasks, AttentionPattern
from fairseq_longformer import LongformerAttentionConfig, LongformerSelfAttention

CONTENDERS = ("dense", "torch", "triton", "hf")

@dataclass
class Case:
    """One measurement: a contender at one length, global-token count and attention-dropout rate."""

    impl: str
    length: int
    global_tokens: int
    batch: int = 1
    heads: int = 12
    head_dim: int = 64
    window: int = 256  # one-sided (HF's attention_window is 2 * window)
    device: str = "cpu"
    dtype: str = "float32"
    repeats: int = 3
    threads: int = 2
    time_cap: float = 60.0  # seconds for one forward+backward before the case counts as too slow
    output_projection: bool = False  # end every contender in the output projection too
    memory_limit_mb: Optional[float] = None  # CPU: address-space headroom for the forked process
    # attention-dropout rate of longformer-bench's contenders (a whole-model case leaves it None:
    # its dropout is its architecture's, and its rows carry no rate)
    dropout: Optional[float] = None

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim


PROJECTIONS = ("q_proj", "k_proj", "v_proj", "q_global_proj", "k_global_proj", "v_global_proj", "out_proj")


def shared_weights(hidden: int, seed: int = 0) -> Dict[str, Tuple[Tensor, Tensor]]:
    """The same (weight, bias) for every contender, by our parameter names."""
    gen = torch.Generator().manual_seed(seed)
    return {name: (torch.randn(hidden, hidden, generator=gen) * hidden ** -0.5,
                   torch.randn(hidden, generator=gen) * 0.02) for name in PROJECTIONS}


def _load(linear: nn.Linear, weight_bias: Tuple[Tensor, Tensor]) -> None:
    with torch.no_grad():
        linear.weight.copy_(weight_bias[0])
        linear.bias.copy_(weight_bias[1])


def dense_pattern_mask(length: int, window: int, is_global: Tensor) -> Tensor:
    """(B, 1, N, N) bool, True where a local query may attend: the band |i - j| <= w and every
    global key. Global query rows are recomputed with the global projections, so their row here
    only has to be non-empty."""
    positions = torch.arange(length, device=is_global.device)
    band = (positions[:, None] - positions[None, :]).abs() <= window
    return (band[None] | is_global[:, None, :])[:, None]


class DenseSDPASelfAttention(nn.Module):
    """Full self-attention with the Longformer pattern as a dense boolean mask (the baseline).

    Input (B, N, C), output (B, N, C); the (B, 1, N, N) mask is built once per input, outside
    the module, as a model would share it across its layers.
    """

    def __init__(self, hidden: int, heads: int, dropout: float = 0.0):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.dropout = dropout  # on the attention probabilities, in training mode (SDPA's dropout_p)
        for name in PROJECTIONS:
            setattr(self, name, nn.Linear(hidden, hidden))

    def _split(self, x: Tensor) -> Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor, is_global: Optional[Tensor], output_projection: bool) -> Tensor:
        q, k, v = (self._split(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, H, N, D)
        if is_global is not None:
            # global rows attend every key with the global projections; (B, G) positions, the
            # same count in every row (as in the benchmark)
            index = is_global.nonzero()[:, 1].view(x.shape[0], -1)
            x_glob = x.gather(1, index[..., None].expand(-1, -1, x.shape[2]))
            q_g = self._split(self.q_global_proj(x_glob))
            k_g, v_g = self._split(self.k_global_proj(x)), self._split(self.v_global_proj(x))
            glob = F.scaled_dot_product_attention(q_g, k_g, v_g, dropout_p=dropout)  # (B, H, G, D)
            out = out.scatter(2, index[:, None, :, None].expand(-1, self.heads, -1, self.head_dim), glob)
        out = out.transpose(1, 2).reshape(x.shape)
        return self.out_proj(out) if output_projection else out


def hf_available() -> Tuple[bool, str]:
    try:
        from transformers.models.longformer import modeling_longformer  # noqa: F401
    except Exception as error:  # ImportError, or OSError from a broken torchaudio beside it
        return False, f"transformers' Longformer does not import: {type(error).__name__}: {error}"
    return True, ""


def build_contender(case: Case, device: torch.device, dtype: torch.dtype,
                    weights: Dict[str, Tuple[Tensor, Tensor]], is_global: Tensor
                    ) -> Tuple[nn.Module, Callable[[Tensor], Tensor]]:
    """(module, f) where f maps hidden states (B, N, C) to (B, N, C) for this case's length."""
    glob = is_global if bool(is_global.any()) else None
    dropout = case.dropout or 0.0
    if case.impl == "dense":
        module = DenseSDPASelfAttention(case.hidden, case.heads, dropout)
        for name in PROJECTIONS:
            _load(getattr(module, name), weights[name])
        module = module.to(device, dtype)
        mask = dense_pattern_mask(is_global.shape[1], case.window, is_global)
        return module, lambda x: module(x, mask, glob, case.output_projection)
    if case.impl in ("torch", "triton"):
        config = LongformerAttentionConfig(AttentionPattern(window=case.window), impl=case.impl, dropout=dropout)
        module = LongformerSelfAttention(case.hidden, case.heads, config)
        for name in PROJECTIONS:
            _load(getattr(module, name), weights[name])
        module = module.to(device, dtype)
        masks = AttentionMasks(padding=None, is_global=is_global)
        if case.output_projection:
            return module, lambda x: module(x.transpose(0, 1), key_padding_mask=masks)[0].transpose(0, 1)
        return module, lambda x: module.attend(x.transpose(0, 1), masks).transpose(0, 1)
    if case.impl == "hf":
        from transformers.models.longformer import modeling_longformer as hf

        config = hf.LongformerConfig(
            hidden_size=case.hidden, num_attention_heads=case.heads, num_hidden_layers=1,
            attention_window=[2 * case.window], attention_probs_dropout_prob=dropout,
        )
        module = nn.ModuleDict({"self": hf.LongformerSelfAttention(config, layer_id=0),
                                "dense": nn.Linear(case.hidden, case.hidden)})
        hf_names = ("query", "key", "value", "query_global", "key_global", "value_global")
        for ours, theirs in zip(PROJECTIONS, hf_names):
            _load(getattr(module["self"], theirs), weights[ours])
        _load(module["dense"], weights["out_proj"])
        module = module.to(device, dtype)
        # the mask as LongformerModel hands it to its layers (transformers 5.x): < 0 padding,
        # 0 local, > 0 global, and the three flags LongformerEncoder derives from it once
        hf_mask = torch.zeros(is_global.shape, dtype=dtype, device=device)
        hf_mask = hf_mask.masked_fill(is_global, torch.finfo(dtype).max)
        flags = dict(is_index_masked=hf_mask < 0, is_index_global_attn=hf_mask > 0,
                     is_global_attn=glob is not None)
        if case.output_projection:
            return module, lambda x: module["dense"](module["self"](x, attention_mask=hf_mask, **flags)[0])
        return module, lambda x: module["self"](x, attention_mask=hf_mask, **flags)[0]
    raise ValueError(f"unknown contender {case.impl!r}; expected one of {CONTENDERS}")


def unavailable_reason(case: Case) -> Optional[str]:
    """Why this contender cannot run this case here, or None."""
    if case.impl == "triton" and case.device != "cuda":
        return "triton needs CUDA"
    if case.impl == "hf":
        ok, why = hf_available()
        if not ok:
            return why
        if case.length % (2 * case.window):
            return f"HF needs N to be a multiple of its window 2w = {2 * case.window}"
    if case.global_tokens > case.length:
        return "more global tokens than positions"
    return None


def make_inputs(case: Case, length: int, device, dtype):
    """(x, grad_out, is_global) for ``case`` at ``length``: x and grad_out (B, N, C), is_global (B, N)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(case.batch, length, case.hidden, generator=gen).to(device, dtype)
    grad_out = torch.randn(case.batch, length, case.hidden, generator=gen).to(device, dtype)
    is_global = torch.zeros(case.batch, length, dtype=torch.bool, device=device)
    is_global[:, :case.global_tokens] = True  # leading tokens, as [CLS] or a question would be
    return x, grad_out, is_global
