#!/usr/bin/env bash
# Sourced by the lease scripts beside it, run from the repository root:
#   source tools/gpu/leases/lease_begin.sh OUT LOGNAME
# OUT created, everything printed also into OUT/LOGNAME, this checkout's packages on PYTHONPATH
# (link_packages) and the helpers of scripts/gpu_stages.sh (stage, parallel_checks) defined.
# Their data stays in docs/results/gpu_h200/.
set -uo pipefail
OUT=$1; mkdir -p "$OUT"
exec > >(tee "$OUT/$2") 2>&1
export OUT PYTHONUNBUFFERED=1 PYTHON="${PYTHON:-python3}"
source scripts/gpu_stages.sh
link_dir="$(link_packages "$PWD")"; export PYTHONPATH="$link_dir"
"$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" && HAS_CUDA=1 || HAS_CUDA=0
start=$SECONDS
