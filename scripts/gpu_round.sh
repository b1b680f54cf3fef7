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

stage checks "${CHECK_S:-170}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/check" --skip-bench
stage tune "${TUNE_S:-90}" "$PYTHON" -m longformer_kernels.gpu_tune "$OUT/tune" --repeats 5 \
  --candidates "${CANDIDATES:-64x64x4x2,64x64x4x3,128x64x4x2,128x64x8x2,128x64x8x3,64x128x4x2,128x128x8x2,32x64x4x2,64x32x4x2}"
LONGFORMER_TRITON_TILES="$(cat "$OUT/tune/best_tiles.txt" 2>/dev/null || true)"
export LONGFORMER_TRITON_TILES
echo "tiles for the benchmark: ${LONGFORMER_TRITON_TILES:-the committed ones}"
# the rows the goal names first: bf16, N = 16,384, B = 8, then the rest
stage bench_bf16 "${BENCH_S:-200}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/bench" --skip-checks \
  --dtypes bf16 --lengths 16384,4096 --batches 8,1 --globals 0,8 --contenders triton,flex,sdpa_flash,torch --repeats 5
stage checks_tuned "${RECHECK_S:-50}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/recheck" --skip-bench \
  --cases prod_
stage bench_fp16 "${BENCH16_S:-60}" "$PYTHON" -m longformer_kernels.gpu_check "$OUT/bench16" --skip-checks \
  --dtypes fp16 --lengths 16384,4096 --batches 8,1 --globals 8 --contenders triton,sdpa_flash,torch --repeats 5
rm -f "$OUT"/*/gpu_check.log  # all.log holds them: eight files at most come back from a lease
echo "=== done at $((SECONDS - start)) s"
