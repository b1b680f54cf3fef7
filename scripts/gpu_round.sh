#!/usr/bin/env bash
# One GPU round in one command, sized for a lease (at most 9 minutes on an H100): fairseq and the
# project installed offline, the kernel checks (production shapes, every dtype), the suite on
# CUDA, whole training steps against transformers, the attention core against FlexAttention.
#   bash scripts/gpu_round.sh OUTDIR
# Needs Python with torch and triton (PYTHON, default python3) and the wheels of
# 'python3 scripts/offline_bundle.py gather .bundle' (BUNDLE, default REPO/.bundle; carried to the
# GPU machine); installs into ENV_DIR (default a new temporary folder); reads the repository only.
# Every stage has its own time limit (INSTALL_S, CHECK_S, SUITE_S, STEPS_S, BENCH_S: seconds) so
# that a slow stage cuts itself short and the next still runs. OUTDIR ends with at most eight
# files: summary.md (read it first), all.log (everything printed), checks.json, suite.log,
# train_steps.json, bench.json. COMMIT names the commit measured where .git did not travel.
# Without CUDA every stage runs its CPU form (tests/kernels/test_gpu_check.py runs it tiny:
# SUITE_ARGS, STEPS_ARGS, BENCH_ARGS narrow those stages).
set -uo pipefail
OUT="${1:?give the output folder: bash scripts/gpu_round.sh OUTDIR}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
BUNDLE="${BUNDLE:-$REPO/.bundle}"
ENV_DIR="${ENV_DIR:-$(mktemp -d)/env}"
mkdir -p "$OUT"
exec > >(tee "$OUT/all.log") 2>&1
export OUT
echo "commit ${COMMIT:-$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)}$(git -C "$REPO" diff --quiet HEAD 2>/dev/null || echo ' (with changes not committed, or no .git)')"
export PYTHONUNBUFFERED=1
source "$REPO/scripts/gpu_stages.sh"  # link_packages, stage, parallel_checks
link_dir="$(link_packages "$REPO")"
export PYTHONPATH="$link_dir${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit \
  --format=csv || true
"$PYTHON" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__,
'triton', triton.__version__, 'cuda', torch.version.cuda); print('device', torch.cuda.get_device_name()
if torch.cuda.is_available() else 'cpu (no CUDA: every stage in its CPU form)')"

# the checks run side by side (parallel_checks, scripts/gpu_stages.sh); without CUDA, once as a CPU smoke
"$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" && HAS_CUDA=1 || HAS_CUDA=0

# Stage 1: the offline install (scripts/offline_bundle.py, from BUNDLE) into ENV_DIR, beside the
# kernel checks (they need only the repository); then the suite, the training steps and the
# kernel benchmark with ENV_DIR's python. Limits (seconds) sum to 8.5 minutes on an H100 (docs/gpu.md).
stage install "${INSTALL_S:-150}" "$PYTHON" "$REPO/scripts/offline_bundle.py" install "$BUNDLE" "$ENV_DIR" \
  > "$OUT/install.part" 2>&1 &
install_pid=$!
parallel_checks checks "${CHECK_S:-120}" prod_ n1_,n97_,n150_,n1025_
wait "$install_pid"
cat "$OUT/install.part"; rm -f "$OUT/install.part"
mv "$OUT/checks/checks.json" "$OUT/checks.json" 2>/dev/null; rmdir "$OUT/checks" 2>/dev/null
ENV_PY="$ENV_DIR/bin/python"
[[ -x "$ENV_PY" ]] || { echo "no environment at $ENV_DIR: the stages that need fairseq use $PYTHON"; ENV_PY="$PYTHON"; }
export PATH="$ENV_DIR/bin:$PATH"
# the suite: the tests marked 'device' on CUDA (tests/support/device.py), 8 workers; its output in suite.log
suite_args=(${SUITE_ARGS:---device cuda -n 8})
# (the repository first on PYTHONPATH: the tests' --user-dir is its fairseq_longformer, which fairseq
# refuses beside an installed copy of another path)
stage suite "${SUITE_S:-220}" bash -c 'cd "$1" && shift && "$@" > "$OUT/suite.log" 2>&1; rc=$?; tail -40 "$OUT/suite.log"; exit $rc' \
  _ "$REPO" env PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$ENV_PY" -m pytest -q -p no:cacheprovider "${suite_args[@]}"
steps_args=(${STEPS_ARGS:---time-cap 12})
stage steps "${STEPS_S:-130}" "$ENV_PY" -m longformer_tools.cli.bench train-steps --out "$OUT/train_steps.json" \
  "${steps_args[@]}"
# the attention core against FlexAttention, the rows issue 42 measures: bf16, N = 16,384, B = 8, G = 0 and 8
bench_args=(${BENCH_ARGS:---dtypes bf16 --lengths 16384 --batches 8 --globals 0,8 --contenders triton,flex,sdpa_flash --repeats 5})
stage bench "${BENCH_S:-75}" "$PYTHON" -m longformer_tools.gpu.gpu_check "$OUT/bench" --skip-checks "${bench_args[@]}"
mv "$OUT/bench/gpu_check.json" "$OUT/bench.json" 2>/dev/null; rm -rf "$OUT/bench"
echo "=== done at $((SECONDS - start)) s"
"$PYTHON" "$REPO/scripts/gpu_round_summary.py" "$OUT" > /dev/null && echo "wrote $OUT/summary.md"
