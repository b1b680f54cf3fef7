"""FlexAttention's time with the mask written different ways (bf16, B = 8, H = 12, N = 16,384,
D = 64, w = 256): which form of the Longformer pattern makes its forward slow. CUDA events,
median of ten after three warm-ups (the first compiles). Arguments: run only the variants whose
label ("G=8 band | j < G | i < G") holds one of them."""
import sys

import torch
import torch._dynamo
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from longformer_tools.gpu.gpu_bench import flex_contender, time_ms

B, H, N, D, W = 8, 12, 16384, 64, 256
torch._dynamo.config.cache_size_limit = 256
attend = torch.compile(flex_attention, dynamic=False)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
grad_out = torch.randn_like(q)


def timed(fn):
    """Median CUDA-event milliseconds of ten calls after three warm-ups (the first compiles)."""
    return time_ms(fn, torch.device("cuda"), 3, 10)


def ours(mask_mod):
    block_mask = create_block_mask(mask_mod, None, None, N, N, device="cuda")
    return lambda *x: attend(*x, block_mask=block_mask), block_mask


def variants(n_global):
    is_global = torch.zeros(N, dtype=torch.bool, device="cuda")
    is_global[:n_global] = True

    def band(b, h, i, j):
        return (i - j).abs() <= W

    def band_global(b, h, i, j):
        return ((i - j).abs() <= W) | is_global[j] | is_global[i]

    def band_global_range(b, h, i, j):  # the bench's global tokens are the first n_global
        return ((i - j).abs() <= W) | (j < n_global) | (i < n_global)
    found = {"gpu_bench.flex_contender": (flex_contender(N, W, is_global, 0.0), None)}
    found["band | is_global[j] | is_global[i]"] = ours(band_global)
    found["band | j < G | i < G"] = ours(band_global_range)
    if not n_global:
        found["band only"] = ours(band)
    return found


for n_global in (0, 8):
    for name, (fn, block_mask) in variants(n_global).items():
        if sys.argv[1:] and not any(text in f"G={n_global} {name}" for text in sys.argv[1:]):
            continue
        def forward():
            with torch.no_grad():
                fn(q, k, v)

        def forward_backward():
            out = fn(*leaves)
            torch.autograd.grad(out, leaves, grad_out)
        sparsity = "" if block_mask is None else f"sparsity {block_mask.sparsity():.2f}%"
        print(f"G={n_global} {name:38} fwd {timed(forward):8.3f} ms  fwd+bwd {timed(forward_backward):8.3f} ms  "
              f"{sparsity}", flush=True)
