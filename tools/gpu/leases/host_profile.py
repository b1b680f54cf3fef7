"""Where a small call's time goes: B = 1, N = 4,096 (bf16, H = 12, D = 64, w = 256), forward and
forward+backward, host wall time per call against the GPU's, then cProfile's top functions."""
import cProfile
import pstats
import time

import torch

from longformer_kernels import AttentionPattern, longformer_attention

q, k, v = (torch.randn(1, 12, 4096, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
grad_out = torch.randn_like(q)
pattern = AttentionPattern(256)


def fwd():
    with torch.no_grad():
        longformer_attention(q, k, v, None, None, None, pattern, impl="triton")


def fwd_bwd():
    out = longformer_attention(q, k, v, None, None, None, pattern, impl="triton")
    torch.autograd.grad(out, (q, k, v), grad_out)


for name, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(100):
        fn()
    host = (time.perf_counter() - start) / 100 * 1e3
    torch.cuda.synchronize()
    total = (time.perf_counter() - start) / 100 * 1e3
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    gpu = sum(e.device_time_total for e in prof.key_averages()) / 20 / 1e3
    print(f"{name:8} host {host:.3f} ms/call, wall {total:.3f} ms/call, GPU kernels {gpu:.3f} ms/call", flush=True)
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=8), flush=True)

profiler = cProfile.Profile()
profiler.enable()
for _ in range(100):
    fwd_bwd()
torch.cuda.synchronize()
profiler.disable()
pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
