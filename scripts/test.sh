#!/usr/bin/env bash
# Set up the environment (scripts/install.sh, skipped when done), check the project as an installed
# wheel (scripts/wheel_check.sh: a fresh venv, every console script, 2 training updates from
# outside the repository), then run the test suite.
#   bash scripts/test.sh [pytest arguments]
# The wheel check (a few minutes) runs for the whole suite, i.e. without pytest arguments (CI), or
# with WHEEL_CHECK=1; WHEEL_CHECK=0 skips it.
# The whole suite runs in TEST_WORKERS pytest-xdist workers (default 2): the Triton interpreter's
# tests are single-threaded Python and the training tests wait on subprocesses, so two workers
# share 2 cores better than one (measured: 23.7 against 30-32 minutes; on 2026-11-26, 1,098 tests
# in 2 workers took 14.2). With pytest arguments it runs in one process unless they say otherwise (-n 2).
# On a machine without CUDA the Triton kernels run in Triton's CPU interpreter
# (TRITON_INTERPRET=1, set by the root conftest.py).
# The suite on a GPU: bash scripts/test.sh --device cuda [pytest arguments] runs the tests marked
# 'device' there (tests/support/device.py), in TEST_WORKERS workers (default 8), with the Python
# already set up (PYTHON, default the venv's or python3; on the GPU image the environment made by
# scripts/offline_bundle.py install): no install step, no wheel check.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
if [[ "${1:-}" == --device ]]; then
  python="${PYTHON:-$([[ -x "${VENV:-$REPO/.venv}/bin/python" ]] && echo "${VENV:-$REPO/.venv}/bin/python" || echo python3)}"
  exec "$python" -m pytest -q -n "${TEST_WORKERS:-8}" "$@"
fi
bash scripts/install.sh
if [[ "${WHEEL_CHECK:-$([[ $# -eq 0 ]] && echo 1 || echo 0)}" == 1 ]]; then
  bash scripts/wheel_check.sh
fi
if [[ $# -eq 0 ]]; then
  set -- -n "${TEST_WORKERS:-2}"
fi
exec "${VENV:-$REPO/.venv}/bin/python" -m pytest -q "$@"
