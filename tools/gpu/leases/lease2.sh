#!/usr/bin/env bash
# second lease: stage sweep of the band kernels, the remaining checks with the best tiles, headline rows, one ncu look
source tools/gpu/leases/lease_begin.sh "$1" all2.log
stage tune2 75 python3 -m longformer_tools.gpu.gpu_tune $OUT/tune2 --repeats 5 \
  --candidates 64x32x4x2,32x64x4x2,64x64x4x3,64x128x4x2,64x32x4x3,64x32x4x4,32x64x4x3,64x64x4x4,128x32x4x3
export LONGFORMER_TRITON_TILES="$(cat $OUT/tune2/best_tiles.txt 2>/dev/null || true)"
stage checks 150 python3 -m longformer_tools.gpu.gpu_check $OUT/check2 --skip-bench --cases n1_,n1025_dil123_padding_globals,prod_
stage headline 30 python3 -m longformer_tools.gpu.gpu_check $OUT/head2 --skip-checks --dtypes bf16 --lengths 16384 \
  --batches 8 --globals 0,8 --contenders triton --repeats 10
cat > /tmp/fwd.py <<'PY'
import torch
from longformer_kernels import AttentionPattern, longformer_attention
q, k, v = (torch.randn(8, 12, 16384, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    with torch.no_grad():
        longformer_attention(q, k, v, None, None, None, AttentionPattern(256), impl="triton")
torch.cuda.synchronize()
PY
stage ncu 40 ncu --clock-control none -k regex:band_fwd -s 2 -c 1 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section LaunchStats python3 /tmp/fwd.py
rm -f $OUT/*/gpu_check.log
echo "=== done at $((SECONDS - start)) s"
