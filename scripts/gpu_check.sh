#!/usr/bin/env bash
# Check and benchmark the Longformer attention on this machine's GPU: one command, needing only
# Python with torch and triton (no fairseq, no pytest, no network, nothing installed).
#   bash scripts/gpu_check.sh OUTDIR [--cpu-smoke] [--skip-bench] [--batches 1,8] [--lengths 4096] ...
# Writes OUTDIR/gpu_check.log and OUTDIR/gpu_check.json; exits non-zero when a check fails.
# Without CUDA it runs a CPU smoke test (tiny shapes, Triton's interpreter). See docs/gpu.md.
#
# The repository's kernels/ folder is the package longformer_kernels and tools/ is longformer_tools
# (the check itself is longformer_tools.gpu): link_packages (scripts/gpu_stages.sh) links them under those names
# in a temporary folder and puts only that folder on PYTHONPATH, so it checks THIS checkout's
# kernels even where an older copy of the project is installed. The repository is only read.
# Environment: PYTHON (default python3).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
if [[ $# -lt 1 || "$1" == -* && "$1" != "-h" && "$1" != "--help" ]]; then
  echo "error: give the output folder first: bash scripts/gpu_check.sh OUTDIR [options]" >&2
  exit 2
fi
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "error: $PYTHON cannot import torch: run with PYTHON=/path/to/python-with-torch" >&2
  exit 2
fi
source "$REPO/scripts/gpu_stages.sh"
link_dir="$(link_packages "$REPO")"
trap 'rm -rf "$link_dir"' EXIT
PYTHONPATH="$link_dir${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m longformer_tools.gpu.gpu_check "$@"
