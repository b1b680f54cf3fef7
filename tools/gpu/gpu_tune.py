"""Tile sweep of the Triton kernels on a GPU: which (BLOCK_M, BLOCK_N, warps, stages) is fastest
for each kernel at a production shape.

    python -m longformer_tools.gpu.gpu_tune OUTDIR [--batch 8] [--length 16384] [--dtype bf16]
                                                 [--globals 8] [--dropout 0.0]

For each candidate tile set (``CANDIDATES``; every kernel launched with it) one call's forward and
backward runs under torch.profiler, and each kernel's device time (median over the repeats) is
read from the profile; the forward and backward wall times come from CUDA events. The best
candidate per kernel is what ``triton_tiles.block_config`` should give (the launchers take
one tile set per kernel). Writes OUTDIR/gpu_tune.json and prints a table. Needs CUDA.
"""
import argparse
import json
import os
import statistics
import sys
from typing import Dict, List

import torch

from longformer_kernels import AttentionDropout, AttentionMasks, AttentionPattern, triton_attention, triton_tiles
from longformer_tools.gpu.gpu_bench import time_ms

# (BLOCK_M, BLOCK_N, num_warps, num_stages) for 16-bit inputs, D = 64
CANDIDATES = [(64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3),
              (64, 128, 4, 2), (64, 128, 8, 2), (128, 128, 8, 2), (32, 64, 4, 2), (64, 32, 4, 2)]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def use_tiles(tiles) -> None:
    """Make every launcher pick ``tiles``, as LONGFORMER_TRITON_TILES=BMxBNxWARPSxSTAGES would
    (the launch list is rebuilt, so the launchers accept it)."""
    triton_tiles._TILE_OVERRIDES = {"*": tuple(tiles)}
    triton_tiles.launch_configurations.cache_clear()
    triton_tiles._known_configs.cache_clear()


def short_name(kernel: str) -> str:
    """Profiler name of a kernel -> the name LONGFORMER_TRITON_TILES takes (None: not ours)."""
    for name in triton_tiles.KERNEL_FLAGS:
        if kernel.startswith(name):
            return triton_tiles.short_name(name)
    return None


def kernel_times(step, repeats: int) -> Dict[str, float]:
    """Median device milliseconds per call of each Triton kernel that ``step`` launches."""
    from torch.profiler import ProfilerActivity, profile

    per_kernel: Dict[str, List[float]] = {}
    for _ in range(repeats):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        seen: Dict[str, float] = {}
        for event in prof.events():
            if event.device_type != torch.autograd.DeviceType.CUDA:
                continue
            name = event.name
            if short_name(name) is None:  # torch's own kernels (fills, copies) have no tiles
                continue
            seen[name] = seen.get(name, 0.0) + event.time_range.elapsed_us() / 1e3
        for name, ms in seen.items():
            per_kernel.setdefault(name, []).append(ms)
    return {name: statistics.median(v) for name, v in per_kernel.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_tune", description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--globals", type=int, default=8)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--candidates", default=None, help="e.g. 64x64x4x2,128x64x8x2 (BM x BN x warps x stages)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        parser.error("gpu_tune needs a CUDA GPU")
    candidates = CANDIDATES if args.candidates is None else [
        tuple(int(x) for x in c.split("x")) for c in args.candidates.split(",")]
    device = torch.device("cuda")
    b, h, n, d = args.batch, args.heads, args.length, args.head_dim
    generator = torch.Generator(device=device).manual_seed(0)
    dtype = DTYPES[args.dtype]
    inputs = [torch.randn(b, h, n, d, device=device, generator=generator, dtype=dtype).requires_grad_()
              for _ in range(6)]
    is_global = torch.zeros(b, n, dtype=torch.bool, device=device)
    is_global[:, :args.globals] = True
    masks = AttentionMasks(is_global=is_global if args.globals else None)
    if not args.globals:
        inputs = inputs[:3] + [None] * 3
    pattern = AttentionPattern(args.window)
    dropout = AttentionDropout(args.dropout, seed=1) if args.dropout else None
    grad_out = torch.randn(b, h, n, d, device=device, generator=generator, dtype=dtype)
    leaves = [t for t in inputs if t is not None]

    def forward():
        return triton_attention.triton_longformer_attention(*inputs, pattern, masks, dropout=dropout)

    def forward_backward():
        torch.autograd.grad(forward(), leaves, grad_out)

    results = []
    print(f"gpu_tune: {torch.cuda.get_device_name()} B={b} H={h} N={n} D={d} w={args.window} {args.dtype} "
          f"G={args.globals} dropout={args.dropout}", flush=True)
    for tiles in candidates:
        use_tiles(tiles)
        record = dict(tiles="x".join(map(str, tiles)))
        try:
            with torch.no_grad():
                forward()  # compile
            forward_backward()
            torch.cuda.synchronize()
            with torch.no_grad():
                record["fwd_ms"] = time_ms(forward, device, 0, args.repeats * 2)
            record["fwd_bwd_ms"] = time_ms(forward_backward, device, 0, args.repeats * 2)
            record["kernels_ms"] = kernel_times(forward_backward, args.repeats)
        except Exception as error:  # noqa: BLE001 (a tile set that does not compile or fit is a result)
            record["error"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
        results.append(record)
        kernels = " ".join(f"{k.split('_kernel')[0].strip('_')}={v:.3f}"
                           for k, v in sorted(record.get("kernels_ms", {}).items()))
        print(f"{record['tiles']:12} fwd {record.get('fwd_ms', float('nan')):8.3f} ms  fwd+bwd "
              f"{record.get('fwd_bwd_ms', float('nan')):8.3f} ms  {record.get('error', kernels)}", flush=True)
    best: Dict[str, tuple] = {}
    for record in results:
        for kernel, ms in record.get("kernels_ms", {}).items():
            if kernel not in best or ms < best[kernel][1]:
                best[kernel] = (record["tiles"], ms)
    for kernel, (tiles, ms) in sorted(best.items()):
        print(f"best {kernel:40} {tiles:12} {ms:.3f} ms", flush=True)
    chosen = ",".join(f"{short_name(k)}={tiles}" for k, (tiles, _) in sorted(best.items()) if short_name(k))
    print(f"{triton_tiles.TILES_ENV}={chosen}", flush=True)
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "best_tiles.txt"), "w") as f:
        f.write(chosen + "\n")
    with open(os.path.join(args.outdir, f"gpu_tune_{args.dtype}_g{args.globals}_p{args.dropout}.json"), "w") as f:
        json.dump(dict(args=vars(args), device=torch.cuda.get_device_name(), results=results, best=best), f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
