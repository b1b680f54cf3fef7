#!/usr/bin/env bash
# One GPU round in one command, sized for a ten-minute lease: checks with the committed tiles,
# a tile sweep, the benchmark with the tiles the sweep found best, and the production checks
# again with those tiles.
#   bash scripts/gpu_round.sh OUTDIR
# Needs Python with torch and triton (PYTHON, default python3); reads the repository only.
# Every stage has its own time limit (seconds, from the environment) so that a slow stage cuts
# itself short and the next still runs; OUTDIR/all.log holds everything printed.
set -uo pipefail
OUT="${1:?give the output folder: bash scripts/gpu_round.sh OUTDIR}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
exec > >(tee "$OUT/all.log") 2>&1
export PYTHONUNBUFFERED=1
link_dir="$(mktemp -d)"
ln -s "$REPO/kernels" "$link_dir/longformer_kernels"
export PYTHONPATH="$link_dir${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
stage() {  # stage NAME LIMIT command...
  local name=$1 limit=$2
  shift 2
  echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"
  timeout "$limit" "$@"
  echo "=== $name: rc $? at $((SECONDS - start)) s"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit \
  --format=csv || true
"$PYTHON" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__,
'triton', triton.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

# Checks: six processes side by side (production shapes and the grid, one dtype each): the grid's
# float64 dense reference runs on the host CPU, and one process ran out of 170 s where six took
# 94-114 s (H200 host, 16 cores). Their logs follow in order; their JSONs merge into checks.json.
# Without CUDA, gpu_check runs its CPU smoke (its own two tiny cases) once instead.
"$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" && HAS_CUDA=1 || HAS_CUDA=0
parallel_checks() {  # parallel_checks NAME LIMIT CASES...: one process per (cases, dtype)
  local name=$1 limit=$2 pids="" part dtype pid rc=0
  shift 2
  echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"
  [[ $HAS_CUDA == 1 ]] || set -- "cpu-smoke"
  for part in "$@"; do
    for dtype in fp32 fp16 bf16; do
      local args=(--skip-bench --dtypes "$dtype" --cases "$part")
      [[ $part == cpu-smoke ]] && args=(--skip-bench)
      OMP_NUM_THREADS=2 timeout "$limit" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/$name/${part%%_*}_$dtype" \
        "${args[@]}" > "$OUT/$name.${part%%_*}_$dtype.log" 2>&1 &
      pids="$pids $!"
      [[ $part == cpu-smoke ]] && break
    done
  done
  for pid in $pids; do  # a bare wait would also wait for the tee above, which never ends
    wait "$pid" || rc=$?
  done
  for f in "$OUT/$name".*.log; do echo "--- $f"; cat "$f"; rm -f "$f"; done
  "$PYTHON" - "$OUT/$name" <<'PY'
import glob, json, os, shutil, sys
folder = sys.argv[1]
merged = {os.path.basename(os.path.dirname(p)): json.load(open(p))
          for p in sorted(glob.glob(os.path.join(folder, "*", "gpu_check.json")))}
records = [r for report in merged.values() for r in report["checks"]]
for part in merged:
    shutil.rmtree(os.path.join(folder, part))
json.dump(merged, open(os.path.join(folder, "checks.json"), "w"), indent=1)
print(f"checks merged: {len(merged)} reports, {len(records)} records, {sum(not r['ok'] for r in records)} failed")
PY
  echo "=== $name: rc $rc at $((SECONDS - start)) s"
}

parallel_checks checks "${CHECK_S:-150}" prod_ n1_,n97_,n150_,n1025_
stage tune "${TUNE_S:-90}" "$PYTHON" -m longformer_kernels.gpu_tune "$OUT/tune" --repeats 5 \
  --candidates "${CANDIDATES:-64x64x4x2,64x64x4x3,128x64x4x2,128x64x8x2,128x64x8x3,64x128x4x2,128x128x8x2,32x64x4x2,64x32x4x2}"
LONGFORMER_TRITON_TILES="$(cat "$OUT/tune/best_tiles.txt" 2>/dev/null || true)"
export LONGFORMER_TRITON_TILES
echo "tiles for the benchmark: ${LONGFORMER_TRITON_TILES:-the committed ones}"
# the rows the goal names first: bf16, N = 16,384, B = 8, then the rest
stage bench_bf16 "${BENCH_S:-200}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/bench" --skip-checks \
  --dtypes bf16 --lengths 16384,4096 --batches 8,1 --globals 0,8 --contenders triton,flex,sdpa_flash,torch --repeats 5
parallel_checks recheck "${RECHECK_S:-60}" prod_
stage bench_fp16 "${BENCH16_S:-60}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/bench16" --skip-checks \
  --dtypes fp16 --lengths 16384,4096 --batches 8,1 --globals 8 --contenders triton,sdpa_flash,torch --repeats 5
rm -f "$OUT"/*/gpu_check.log  # all.log holds them: eight files at most come back from a lease
echo "=== done at $((SECONDS - start)) s"
