"""Old kernels (the commit before the three-loop band walk, carried as package
longformer_kernels_old) against the working tree's, side by side in one process: bf16, H = 12,
D = 64, w = 256, forward and forward+backward, medians of CUDA-event times taken in alternating
rounds. ``--warm old|new`` only runs every configuration once (compiles into Triton's cache)."""
import importlib
import statistics
import sys

import torch

from longformer_tools.gpu.gpu_bench import call_times_ms

CUDA = torch.device("cuda")
CASES = [(8, 16384, 0, 0.0), (8, 16384, 8, 0.0), (8, 16384, 0, 0.1), (8, 16384, 8, 0.1),
         (8, 4096, 0, 0.0), (1, 4096, 0, 0.0), (1, 16384, 8, 0.0)]


def contender(package, batch, length, n_global, p_drop):
    api = importlib.import_module(f"{package}.api")
    pattern_mod = importlib.import_module(f"{package}.pattern")
    dropout_mod = importlib.import_module(f"{package}.dropout")
    is_global = torch.zeros(batch, length, dtype=torch.bool, device="cuda")
    is_global[:, :n_global] = True
    masks = pattern_mod.AttentionMasks(is_global=is_global if n_global else None)
    pattern = pattern_mod.AttentionPattern(256)
    dropout = dropout_mod.AttentionDropout(p_drop, seed=1) if p_drop else None

    def attend(q, k, v, q_g, k_g, v_g):
        if not n_global:
            q_g = k_g = v_g = None
        return api.longformer_attention(q, k, v, q_g, k_g, v_g, pattern, masks, impl="triton", dropout=dropout)
    return attend


def steps(attend, batch, length, n_global):
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = [torch.randn(batch, 12, length, 64, device="cuda", dtype=torch.bfloat16, generator=gen)
              for _ in range(6)]
    used = 6 if n_global else 3
    leaves = [t.detach().requires_grad_() for t in inputs]
    grad_out = torch.randn_like(inputs[0])

    def forward():
        with torch.no_grad():
            attend(*inputs)

    def forward_backward():
        out = attend(*leaves)
        torch.autograd.grad(out, leaves[:used], grad_out)
    return {"fwd": forward, "fwd+bwd": forward_backward}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--warm":
        package = {"old": "longformer_kernels_old", "new": "longformer_kernels"}[sys.argv[2]]
        for batch, length, n_global, p_drop in CASES:
            for fn in steps(contender(package, batch, length, n_global, p_drop), batch, length, n_global).values():
                fn()
        torch.cuda.synchronize()
        print(f"warm {package}: done", flush=True)
        return
    print(f"{'B':>2} {'N':>6} {'G':>2} {'drop':>4} {'pass':8} {'old ms':>8} {'new ms':>8} {'old/new':>8}", flush=True)
    for batch, length, n_global, p_drop in CASES:
        fns = {p: steps(contender(p, batch, length, n_global, p_drop), batch, length, n_global)
               for p in ("longformer_kernels_old", "longformer_kernels")}
        for name in ("fwd", "fwd+bwd"):
            samples = {p: [] for p in fns}
            for p in fns:
                call_times_ms(fns[p][name], CUDA, 3)  # warm-up
            for _ in range(5):
                for p in fns:
                    samples[p] += call_times_ms(fns[p][name], CUDA, 4)
            old, new = (statistics.median(samples[p]) for p in fns)
            print(f"{batch:>2} {length:>6} {n_global:>2} {p_drop:4.1f} {name:8} {old:8.3f} {new:8.3f} {old / new:8.3f}",
                  flush=True)
        del fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
