#!/usr/bin/env bash
# third lease: every check in every dtype (six processes side by side, production shapes in
# three of them), the benchmark with the split global rows, FlexAttention's forward-only
# anomaly, and compute-sanitizer's memcheck over the small grid cases
source tools/gpu/leases/lease_begin.sh "$1" all3.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv || true

# checks: the float64 dense reference of the grid runs on the host CPU, so each process gets
# two threads; the Triton compiles of the six run side by side
parallel_checks checks "${CHECK_S:-170}" prod_ n1_,n97_,n150_,n1025_

stage bench_bf16 ${BENCH_S:-120} python3 -m longformer_tools.gpu.gpu_check $OUT/bench --skip-checks --dtypes bf16 \
  --lengths 16384,4096 --batches 8,1 --globals 0,8 --contenders triton,flex,sdpa_flash,torch --repeats 5
stage bench_fp16 30 python3 -m longformer_tools.gpu.gpu_check $OUT/bench16 --skip-checks --dtypes fp16 \
  --lengths 16384 --batches 8 --globals 0,8 --contenders triton --repeats 5
stage flex_forward 40 python3 tools/gpu/leases/flex_forward.py
PYTORCH_NO_CUDA_MEMORY_CACHING=1 stage memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  python3 -m longformer_tools.gpu.gpu_check $OUT/memcheck --skip-bench --dtypes fp16 \
  --cases n97_w1,n97_w0,n150_,n97_causal
rm -f $OUT/*/gpu_check.log
echo "=== done at $((SECONDS - start)) s"
