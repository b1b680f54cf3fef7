#!/usr/bin/env bash
# Set up the environment (scripts/install.sh, skipped when done) and run the whole test suite.
#   bash scripts/test.sh [pytest arguments]
# On a machine without CUDA the Triton kernels run in Triton's CPU interpreter
# (TRITON_INTERPRET=1, set by the root conftest.py).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
bash scripts/install.sh
exec "${VENV:-$REPO/.venv}/bin/python" -m pytest -q "$@"
