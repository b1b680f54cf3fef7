# shellcheck shell=bash
# The start of a recipe that runs the project's code, sourced after `set -euo pipefail` as
#   source "$(dirname "${BASH_SOURCE[0]}")/project_python.sh"
# Sets REPO (the repository's root, this folder's parent) and the project's Python and console
# scripts (PATH and PYTHON): the active virtual environment's, else the repository's .venv (VENV),
# else the system's python3. Debian and Ubuntu have no `python` command without python-is-python3,
# so recipes call "$PYTHON", never `python` (python3 is the project's too once PATH is set here).
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${VIRTUAL_ENV:-}" && -x "${VENV:-$REPO/.venv}/bin/python" ]]; then
  PATH="${VENV:-$REPO/.venv}/bin:$PATH"
fi
PYTHON="$(command -v python3 || command -v python)" \
  || { echo "no python3 on PATH: install Python 3.10-3.12, then run scripts/install.sh" >&2; exit 2; }
