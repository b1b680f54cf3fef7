#!/usr/bin/env bash
# third lease: every check in every dtype (six processes side by side, production shapes in
# three of them), the benchmark with the split global rows, FlexAttention's forward-only
# anomaly, and compute-sanitizer's memcheck over the small grid cases
set -uo pipefail
OUT=$1; mkdir -p $OUT
exec > >(tee "$OUT/all3.log") 2>&1
export PYTHONUNBUFFERED=1
link_dir="$(mktemp -d)"; ln -s "$PWD/kernels" "$link_dir/longformer_kernels"; export PYTHONPATH="$link_dir"
start=$SECONDS
stage() { local name=$1 limit=$2; shift 2; echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"; timeout "$limit" "$@"; echo "=== $name: rc $? at $((SECONDS - start)) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv || true

# checks: the float64 dense reference of the grid runs on the host CPU, so each process gets
# two threads; the Triton compiles of the six run side by side
echo "=== checks (limit ${CHECK_S:-170} s, at $((SECONDS - start)) s)"
for part in prod:prod_ grid:n1_,n97_,n150_,n1025_; do
  for dtype in fp32 fp16 bf16; do
    name=${part%%:*}_$dtype
    OMP_NUM_THREADS=2 timeout "${CHECK_S:-170}" python3 -m longformer_kernels.gpu_check "$OUT/$name" --skip-bench \
      --dtypes $dtype --cases ${part#*:} > "$OUT/$name.log" 2>&1 &
    pids="${pids:-} $!"
  done
done
wait $pids  # a bare wait would also wait for the tee above, which never ends
for f in $OUT/prod_*.log $OUT/grid_*.log; do echo "--- $(basename $f .log)"; cat $f; done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
merged = {}
for path in sorted(glob.glob(os.path.join(out, "*", "gpu_check.json"))):
    merged[os.path.basename(os.path.dirname(path))] = json.load(open(path))
json.dump(merged, open(os.path.join(out, "checks.json"), "w"), indent=1)
records = [r for rep in merged.values() for r in rep["checks"]]
print(f"=== checks merged: {len(merged)} reports, {len(records)} records, {sum(not r['ok'] for r in records)} failed")
PY
rm -rf $OUT/prod_* $OUT/grid_*
echo "=== checks: done at $((SECONDS - start)) s"

stage bench_bf16 ${BENCH_S:-120} python3 -m longformer_kernels.gpu_check $OUT/bench --skip-checks --dtypes bf16 \
  --lengths 16384,4096 --batches 8,1 --globals 0,8 --contenders triton,flex,sdpa_flash,torch --repeats 5
stage bench_fp16 30 python3 -m longformer_kernels.gpu_check $OUT/bench16 --skip-checks --dtypes fp16 \
  --lengths 16384 --batches 8 --globals 0,8 --contenders triton --repeats 5
stage flex_forward 40 python3 docs/results/gpu_h200/flex_forward.py
PYTORCH_NO_CUDA_MEMORY_CACHING=1 stage memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  python3 -m longformer_kernels.gpu_check $OUT/memcheck --skip-bench --dtypes fp16 \
  --cases n97_w1,n97_w0,n150_,n97_causal
rm -f $OUT/*/gpu_check.log
echo "=== done at $((SECONDS - start)) s"
