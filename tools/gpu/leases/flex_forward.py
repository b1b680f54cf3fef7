"""Why FlexAttention's forward alone timed 14.45 ms at B = 8, N = 16,384 (bf16, w = 256) while
its forward+backward timed 17.69 ms: the same compiled call timed four ways, CUDA events,
median of ten after three warm-ups, with dynamo's counters after each."""

import torch
import torch._dynamo
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from longformer_tools.gpu.gpu_bench import time_ms

B, H, N, D, W = 8, 12, 16384, 64, 256
torch._dynamo.config.cache_size_limit = 64


def band(b, h, q, k):
    return (q - k).abs() <= W


mask = create_block_mask(band, None, None, N, N, device="cuda")
print("block mask:", mask.shape if hasattr(mask, "shape") else "", "sparsity", f"{mask.sparsity():.2f}%",
      "BLOCK_SIZE", mask.BLOCK_SIZE, flush=True)
attend = torch.compile(flex_attention, dynamic=False)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
q_r, k_r, v_r = (t.detach().clone().requires_grad_() for t in (q, k, v))
grad_out = torch.randn_like(q)


def timed(fn):
    """Median CUDA-event milliseconds of ten calls after three warm-ups (the first compiles)."""
    return time_ms(fn, torch.device("cuda"), 3, 10)


def fwd_no_grad():
    with torch.no_grad():
        attend(q, k, v, block_mask=mask)


def fwd_inference_mode():
    with torch.inference_mode():
        attend(q, k, v, block_mask=mask)


def fwd_grad_inputs():
    attend(q_r, k_r, v_r, block_mask=mask)


def fwd_bwd():
    out = attend(q_r, k_r, v_r, block_mask=mask)
    torch.autograd.grad(out, (q_r, k_r, v_r), grad_out)


for name, fn in [("fwd, no_grad", fwd_no_grad), ("fwd, inference_mode", fwd_inference_mode),
                 ("fwd, inputs require grad", fwd_grad_inputs), ("fwd+bwd", fwd_bwd),
                 ("fwd, no_grad again", fwd_no_grad)]:
    ms = timed(fn)
    counters = {k: dict(v) for k, v in torch._dynamo.utils.counters.items() if k in ("stats", "frames", "graph_break")}
    print(f"{name:26} {ms:8.3f} ms   dynamo {counters}", flush=True)
