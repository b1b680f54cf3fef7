#!/usr/bin/env bash
# The paper's char-LM ablation (Table 4: windows decreasing / fixed / increasing over the layers,
# then dilation on 2 heads against none), in small, on the bundled KJV corpus at character level,
# on CPU, in one command (about 20 minutes of two free cores with the default relative positions):
#
#   bash recipes/charlm_ablation.sh                        # results in work/charlm_ablation/
#   SEEDS=1 UPDATES=200 bash recipes/charlm_ablation.sh    # faster, one seed, weaker
#   bash recipes/charlm_ablation.sh --help                 # every flag of the experiment
#
# experiments/charlm_ablation/ has the rows, the training and the evaluation. Four rows x SEEDS,
# each a fairseq-train run from scratch and a fairseq-eval-lm on the same valid characters; the
# table shows bits per character per seed and mean ± spread (half the range over seeds), and a
# line says whether the paper's ordering holds (increasing < fixed < decreasing, dilation < none).
#
# Environment variables (unset: the experiment's default, shown here):
#   OUT=work/charlm_ablation   ablation.md, ablation.json, runs/ (recreated), data/ (kept)
#   SEEDS=1,2                  UPDATES=300  BATCH_SIZE=8  LR=2e-3
#   LAYERS=4 DIM=128 HEADS=4   BOTTOM=8 TOP=64   (one-sided windows of the bottom and top layers)
#   SEQUENCE=512 CONTEXT=256   training sequence and eval window; its unscored context
#   POSITIONS=relative         Transformer-XL's relative positions (the paper's), or learned
#   PARALLEL=2 THREADS=1       runs at a time, intra-op threads each (more threads per run
#                              are slower on a shared machine)
#   PYTHON=<repo>/.venv/bin/python when it exists, else python3
# Extra arguments go to python -m longformer_experiments.charlm_ablation last. Exit status nonzero only when a run fails or a
# value is not finite (never because of the ordering).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi
export OMP_NUM_THREADS="${THREADS:-1}"

ARGS=()
# shellcheck source=recipes/env_flags.sh
source "$REPO/recipes/env_flags.sh"
flags_from_env OUT SEEDS UPDATES BATCH_SIZE LR LAYERS DIM HEADS BOTTOM TOP SEQUENCE CONTEXT \
  POSITIONS PARALLEL THREADS

cd "$REPO"
exec "$PYTHON" -m longformer_experiments.charlm_ablation "${ARGS[@]}" "$@"
