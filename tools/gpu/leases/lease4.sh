#!/usr/bin/env bash
# fourth lease: the three-loop band walk. Checks in every dtype (six processes) while two more
# compile the old and new kernels for the A/B; then the A/B, a tile sweep of the new kernels,
# the headline rows with the swept tiles, FlexAttention's mask written three ways, and where a
# small call's host time goes. The old kernels travel as .gpu_old/kernels (git archive of the
# commit before).
source tools/gpu/leases/lease_begin.sh "$1" all4.log
ln -s "$PWD/.gpu_old/kernels" "$link_dir/longformer_kernels_old"
R=tools/gpu/leases

warm_pids=""
for which in old new; do
  timeout "${CHECK_S:-130}" python3 $R/ab_kernels.py --warm $which > "$OUT/warm_$which.log" 2>&1 &
  warm_pids="$warm_pids $!"
done
parallel_checks checks "${CHECK_S:-130}" prod_ n1_,n97_,n150_,n1025_
wait $warm_pids  # a bare wait would also wait for the tee above, which never ends
for f in $OUT/warm_*.log; do echo "--- $(basename $f .log)"; cat $f; done
rm -f $OUT/warm_*.log

stage ab 70 python3 $R/ab_kernels.py
stage tune 80 python3 -m longformer_tools.gpu.gpu_tune $OUT/tune --repeats 5 \
  --candidates 64x32x4x2,64x64x4x2,64x64x4x3,128x64x4x2,128x64x8x2,128x64x8x3,128x32x4x2,32x64x4x2,64x128x4x2
export LONGFORMER_TRITON_TILES="$(cat $OUT/tune/best_tiles.txt 2>/dev/null || true)"
stage headline 30 python3 -m longformer_tools.gpu.gpu_check $OUT/head --skip-checks --dtypes bf16 --lengths 16384 \
  --batches 8 --globals 0,8 --contenders triton --repeats 10
unset LONGFORMER_TRITON_TILES
stage flex 60 python3 $R/flex_variants.py
stage host 25 python3 $R/host_profile.py
rm -f $OUT/*/gpu_check.log
echo "=== done at $((SECONDS - start)) s"
