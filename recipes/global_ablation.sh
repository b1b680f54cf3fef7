#!/usr/bin/env bash
# The paper's WikiHop ablation of global attention (Table 10), in small, on CPU: a long-document
# classification built from the bundled corpus whose label sits beyond the receptive field of
# <s> (layers x window), four models x SEEDS trained from scratch, the table printed and saved.
# experiments/global_ablation/ has the task, the rows and the check.
#
#   bash recipes/global_ablation.sh                       # 12 trainings one after another (64 min measured at load ~15)
#   SEEDS=1 UPDATES=100 bash recipes/global_ablation.sh   # faster, one seed
#
# Environment (unset: the experiment's default, shown here):
#   OUT=work/global_ablation   ablation.md, ablation.json, logs/, data/ (reused while unchanged)
#   SEEDS=1,2,3                ROWS=all four ("global", "global (shared Q/K/V)", "no global", "RoBERTa-length")
#   UPDATES=200  BATCH_SIZE=16  LR=1e-3
#   LAYERS=2 DIM=128 HEADS=4 WINDOW=32   (<s> sees LAYERS x WINDOW = 64 tokens without global attention)
#   LONG=1024  SHORT=256       input tokens of the long models / of the RoBERTa-length row
#   DOC_WORDS=300  NEEDLES=3  TRAIN_EXAMPLES=3200  VALID_EXAMPLES=400  VOCAB=2000
#   THREADS=1                  torch threads per training (runs go one after another)
# Extra arguments go to python -m longformer_experiments.global_ablation last. Exit status 1 when "no global" is not below
# every other row on every seed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
source "${VENV:-$REPO/.venv}/bin/activate"
export OMP_NUM_THREADS="${THREADS:-1}"

ARGS=()
# shellcheck source=recipes/env_flags.sh
source "$REPO/recipes/env_flags.sh"
flags_from_env OUT SEEDS ROWS UPDATES BATCH_SIZE LR LAYERS DIM HEADS WINDOW LONG SHORT DOC_WORDS \
  TRAIN_EXAMPLES VALID_EXAMPLES VOCAB NEEDLES
exec python3 -m longformer_experiments.global_ablation "${ARGS[@]}" "$@"
