#!/usr/bin/env bash
# fourth lease: the three-loop band walk. Checks in every dtype (six processes) while two more
# compile the old and new kernels for the A/B; then the A/B, a tile sweep of the new kernels,
# the headline rows with the swept tiles, FlexAttention's mask written three ways, and where a
# small call's host time goes. The old kernels travel as .gpu_old/kernels (git archive of the
# commit before).
set -uo pipefail
OUT=$1; mkdir -p $OUT
exec > >(tee "$OUT/all4.log") 2>&1
export PYTHONUNBUFFERED=1
link_dir="$(mktemp -d)"; ln -s "$PWD/kernels" "$link_dir/longformer_kernels"
ln -s "$PWD/.gpu_old/kernels" "$link_dir/longformer_kernels_old"; export PYTHONPATH="$link_dir"
R=docs/results/gpu_h200
start=$SECONDS
stage() { local name=$1 limit=$2; shift 2; echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"; timeout "$limit" "$@"; echo "=== $name: rc $? at $((SECONDS - start)) s"; }

echo "=== checks + warm (limit ${CHECK_S:-130} s, at $((SECONDS - start)) s)"
pids=""
for part in prod:prod_ grid:n1_,n97_,n150_,n1025_; do
  for dtype in fp32 fp16 bf16; do
    name=${part%%:*}_$dtype
    OMP_NUM_THREADS=2 timeout "${CHECK_S:-130}" python3 -m longformer_kernels.gpu_check "$OUT/$name" --skip-bench \
      --dtypes $dtype --cases ${part#*:} > "$OUT/$name.log" 2>&1 &
    pids="$pids $!"
  done
done
for which in old new; do
  timeout "${CHECK_S:-130}" python3 $R/ab_kernels.py --warm $which > "$OUT/warm_$which.log" 2>&1 &
  pids="$pids $!"
done
wait $pids  # a bare wait would also wait for the tee above, which never ends
for f in $OUT/prod_*.log $OUT/grid_*.log $OUT/warm_*.log; do echo "--- $(basename $f .log)"; cat $f; done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
merged = {os.path.basename(os.path.dirname(p)): json.load(open(p))
          for p in sorted(glob.glob(os.path.join(out, "*", "gpu_check.json")))}
json.dump(merged, open(os.path.join(out, "checks.json"), "w"), indent=1)
records = [r for rep in merged.values() for r in rep["checks"]]
print(f"=== checks merged: {len(merged)} reports, {len(records)} records, {sum(not r['ok'] for r in records)} failed")
PY
rm -rf $OUT/prod_* $OUT/grid_* $OUT/warm_*
echo "=== checks + warm: done at $((SECONDS - start)) s"

stage ab 70 python3 $R/ab_kernels.py
stage tune 80 python3 -m longformer_kernels.gpu_tune $OUT/tune --repeats 5 \
  --candidates 64x32x4x2,64x64x4x2,64x64x4x3,128x64x4x2,128x64x8x2,128x64x8x3,128x32x4x2,32x64x4x2,64x128x4x2
export LONGFORMER_TRITON_TILES="$(cat $OUT/tune/best_tiles.txt 2>/dev/null || true)"
stage headline 30 python3 -m longformer_kernels.gpu_check $OUT/head --skip-checks --dtypes bf16 --lengths 16384 \
  --batches 8 --globals 0,8 --contenders triton --repeats 10
unset LONGFORMER_TRITON_TILES
stage flex 60 python3 $R/flex_variants.py
stage host 25 python3 $R/host_profile.py
rm -f $OUT/*/gpu_check.log
echo "=== done at $((SECONDS - start)) s"
