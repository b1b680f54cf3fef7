#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment, in the order that works for fairseq:
#   1. torch first (CPU wheel 2.13.0 here; on a GPU machine install your CUDA build of torch
#      into the venv BEFORE running this script and it is kept),
#   2. numpy/cython, then fairseq-fixed built against THAT torch (--no-build-isolation; pip's
#      isolated build would pull another torch and ~3 GB of CUDA wheels),
#   3. this project, editable, with the Hugging Face and test extras.
# Idempotent: a finished install is detected by a stamp file and skipped.
#
# Environment:
#   VENV=.venv            where the virtual environment lives
#   PYTHON=python3        the interpreter that creates it (3.10 or 3.11)
#   TORCH_SPEC=torch==2.13.0   what to install when the venv has no torch yet
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
STAMP="$VENV/.fairseq-longformer-installed"

if [[ -f "$STAMP" && "$STAMP" -nt "$REPO/setup.py" ]]; then
  echo "[install] $VENV is up to date (delete $STAMP to reinstall)"
  exit 0
fi

start=$SECONDS
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install --disable-pip-version-check)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "[install] installing $TORCH_SPEC"
  "${pip[@]}" "$TORCH_SPEC"
fi
# Pin whatever torch is now installed, so no later step (fairseq's dependencies) can move it.
constraints="$VENV/torch-constraint.txt"
"$VENV/bin/python" -c "import torch; print('torch==' + torch.__version__)" > "$constraints"
echo "[install] keeping $(cat "$constraints")"

"${pip[@]}" -c "$constraints" "numpy>=1.26" cython setuptools wheel
if ! "$VENV/bin/python" -c "import fairseq" 2>/dev/null; then
  echo "[install] building fairseq-fixed 0.12.3.1 against the installed torch (about 3-5 minutes)"
  "${pip[@]}" -c "$constraints" --no-build-isolation --no-cache-dir "fairseq-fixed==0.12.3.1"
fi
"${pip[@]}" -c "$constraints" --no-build-isolation -e "$REPO[dev]"

# fairseq-fixed pulls PyPI's torchaudio, a CUDA build that cannot load beside a CPU torch; once
# installed, transformers' Longformer imports it and dies (OSError: _torchaudio.abi3.so).
# Nothing here uses torchaudio, so remove it when torch is a CPU build.
if "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)"; then
  "$VENV/bin/python" -m pip uninstall -y -q torchaudio 2>/dev/null || true
fi

"$VENV/bin/python" -c "import fairseq, fairseq_longformer, longformer_kernels, longformer_preprocessing, transformers"
touch "$STAMP"
echo "[install] done in $((SECONDS - start)) s: activate with 'source $VENV/bin/activate'"
