#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment, in the order that works for fairseq:
#   1. torch: kept if the venv (or, on a CUDA image, the image's Python) already has one;
#      otherwise TORCH_SPEC (the CPU wheel 2.13.0 here). An installed torch is never replaced.
#   2. numpy/cython, then fairseq-fixed built ONCE against THAT torch into a wheel cache inside
#      the venv ($VENV/wheelhouse; pip's isolated build would pull another torch and ~3 GB of
#      CUDA wheels) and installed from there: CI's wheel check reuses that wheel.
#   3. this project, editable, with the Hugging Face and test extras.
# Idempotent: a finished install is detected by a stamp file and skipped.
#
# Supported: Python 3.10, 3.11, 3.12 (fairseq-fixed 0.12.3.1 builds on each; 3.12 has a wheel).
# torch >= 2.6 (older ones run code from pickles even with weights_only=True, CVE-2025-32434).
# Combinations expected:
#   CPU:   torch 2.13.0 (+cpu) with triton 3.9 (the kernels run in Triton's interpreter)
#   CUDA:  a CUDA build of torch >= 2.6 (cu124, cu126, cu128, cu130) with the triton that its
#          wheel pins (torch 2.6 -> triton 3.2 ... torch 2.11 -> triton 3.6; seen on the
#          project's GPU machines: Python 3.12.3, torch 2.11.0+cu130, triton 3.6.0); a GPU of
#          compute capability >= 8.0 for bf16. The script checks torch's version and CUDA-ness,
#          never changes either, and says which it kept.
# On a CUDA image whose Python already has torch, the venv is created with
# --system-site-packages so that torch (and its triton) is used as is. Otherwise install your
# CUDA torch into the venv BEFORE running this script.
#
# Environment:
#   VENV=.venv            where the virtual environment lives
#   PYTHON=python3        the interpreter that creates it (3.10, 3.11 or 3.12; e.g. PYTHON=python3.12)
#   TORCH_SPEC=torch==2.13.0   what to install when neither the venv nor the image has a torch
#   SYSTEM_SITE_PACKAGES=auto  1: see the interpreter's packages (its torch); 0: never; auto: when
#                              that interpreter has a CUDA torch
#   DRY_RUN=1             print what would be done (Python, torch, fairseq decisions) and change nothing
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
SYSTEM_SITE_PACKAGES="${SYSTEM_SITE_PACKAGES:-auto}"
DRY_RUN="${DRY_RUN:-0}"
STAMP="$VENV/.fairseq-longformer-installed"
WHEELHOUSE="$VENV/wheelhouse"
FAIRSEQ_SPEC="fairseq-fixed==0.12.3.1"

fail() { echo "[install] error: $*" >&2; exit 1; }
# run CMD...: run it, or only print it under DRY_RUN=1
run() { if [[ "$DRY_RUN" == 1 ]]; then echo "[install] would run: $*"; else "$@"; fi; }

if [[ "$DRY_RUN" != 1 && -f "$STAMP" && "$STAMP" -nt "$REPO/setup.py" && "$STAMP" -nt "${BASH_SOURCE[0]}" ]]; then
  echo "[install] $VENV is up to date (delete $STAMP to reinstall)"
  exit 0
fi

# torch_info PY: "VERSION CUDA" of PY's torch (CUDA "none" for a CPU build), or nothing
torch_info() {
  "$1" -c "import torch; print(torch.__version__, torch.version.cuda or 'none')" 2>/dev/null || true
}
# torch_too_old VERSION: true when VERSION < 2.6
torch_too_old() {
  "$PYTHON" -c "import sys; v = tuple(int(x) for x in sys.argv[1].split('+')[0].split('.')[:2]); sys.exit(0 if v < (2, 6) else 1)" "$1"
}

start=$SECONDS
if [[ ! -x "$VENV/bin/python" ]]; then
  command -v "$PYTHON" >/dev/null || fail "PYTHON=$PYTHON not found: set PYTHON to a Python 3.10-3.12 interpreter, e.g. PYTHON=python3.12"
  base="$PYTHON"
else
  base="$VENV/bin/python"
fi
py_version="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" \
  || fail "$base does not run: set PYTHON to a working Python 3.10-3.12 interpreter, e.g. PYTHON=python3.12"
case "$py_version" in
  3.10|3.11|3.12) ;;
  *) fail "Python $py_version ($base) is not supported: use 3.10, 3.11 or 3.12 (PYTHON=python3.12), or delete $VENV to recreate it" ;;
esac

# Decide about torch before anything is written: an image's or venv's torch is kept, never replaced.
system_site=0
if [[ ! -x "$VENV/bin/python" ]]; then
  current_torch="$(torch_info "$PYTHON")"
  if [[ "$SYSTEM_SITE_PACKAGES" == 1 ]] || [[ "$SYSTEM_SITE_PACKAGES" == auto && -n "$current_torch" && "${current_torch#* }" != none ]]; then
    system_site=1
  else
    current_torch=""  # a plain venv does not see the interpreter's torch
  fi
else
  current_torch="$(torch_info "$VENV/bin/python")"
fi
if [[ -n "$current_torch" ]] && torch_too_old "${current_torch% *}"; then
  fail "torch ${current_torch% *} is older than 2.6, which runs code from pickles even with weights_only=True (CVE-2025-32434): install torch >= 2.6 first"
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  if [[ "$system_site" == 1 ]]; then
    echo "[install] creating $VENV (Python $py_version) over $PYTHON's packages, to keep its torch"
    run "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    echo "[install] creating $VENV (Python $py_version)"
    run "$PYTHON" -m venv "$VENV"
  fi
fi
py="$VENV/bin/python"
pip=("$py" -m pip install --disable-pip-version-check)

if [[ -z "$current_torch" ]]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "[install] a GPU is visible but no torch is installed: installing $TORCH_SPEC from pip's index;" \
         "for a specific CUDA build install it into $VENV first (pip install torch --index-url https://download.pytorch.org/whl/cu1XX)"
  fi
  echo "[install] installing $TORCH_SPEC"
  run "${pip[@]}" "$TORCH_SPEC"
  [[ "$DRY_RUN" == 1 ]] || current_torch="$(torch_info "$py")"
  if [[ -n "$current_torch" ]] && torch_too_old "${current_torch% *}"; then
    fail "TORCH_SPEC=$TORCH_SPEC installed torch ${current_torch% *}, older than 2.6 (CVE-2025-32434): use torch>=2.6"
  fi
else
  echo "[install] keeping torch ${current_torch% *} (CUDA ${current_torch#* })"
fi
if [[ "$DRY_RUN" == 1 ]]; then
  pinned="${current_torch% *}"
  echo "[install] would pin torch==${pinned:-(the version $TORCH_SPEC installs)} for every later step, build $FAIRSEQ_SPEC into $WHEELHOUSE"\
       "unless a wheel is there, install it, then 'pip install -e $REPO[dev]'"
  exit 0
fi

# Pin whatever torch is now installed, so no later step (fairseq's dependencies) can move it.
constraints="$VENV/torch-constraint.txt"
"$py" -c "import torch; print('torch==' + torch.__version__)" > "$constraints"

"${pip[@]}" -c "$constraints" "numpy>=1.26" cython setuptools wheel
mkdir -p "$WHEELHOUSE"
if ! compgen -G "$WHEELHOUSE/fairseq_fixed-0.12.3.1-*.whl" >/dev/null; then
  echo "[install] building $FAIRSEQ_SPEC against torch ${current_torch% *} into $WHEELHOUSE (about 3-5 minutes)"
  "$py" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps --no-cache-dir \
    -w "$WHEELHOUSE" "$FAIRSEQ_SPEC"
fi
if ! "$py" -c "import fairseq" 2>/dev/null; then
  "${pip[@]}" -c "$constraints" --find-links "$WHEELHOUSE" --only-binary fairseq-fixed "$FAIRSEQ_SPEC"
fi
"${pip[@]}" -c "$constraints" --no-build-isolation -e "$REPO[dev]"

# fairseq-fixed pulls PyPI's torchaudio, a CUDA build that cannot load beside a CPU torch; once
# installed, transformers' Longformer imports it and dies (OSError: _torchaudio.abi3.so).
# Nothing here uses torchaudio, so remove it when torch is a CPU build.
if "$py" -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)"; then
  "$py" -m pip uninstall -y -q torchaudio 2>/dev/null || true
fi

after="$(torch_info "$py")"
[[ "$after" == "$current_torch" ]] || fail "torch changed during the install ($current_torch -> $after): report this; reinstall your torch"
"$py" -c "import fairseq, fairseq_longformer, longformer_kernels, longformer_preprocessing, transformers"
touch "$STAMP"
echo "[install] done in $((SECONDS - start)) s (Python $py_version, torch ${after% *}, CUDA ${after#* }): activate with 'source $VENV/bin/activate'"
