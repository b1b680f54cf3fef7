#!/usr/bin/env bash
# The character-level Longformer on the bundled corpus (data/kjv, 4.2M characters), on CPU in
# about 10 minutes of one core (measured: 545 s user + 52 s system CPU time, valid 2.10 bits per
# character on windows of 1,024 characters against the unigram baseline's 4.35): the paper's
# staged recipe (recipes/charlm_common.sh) in small, then bits per character on valid against
# the corpus's unigram baseline, and a sample.
#
#   recipes/charlm_demo.sh                   # writes work/charlm-demo/
#   OUT=/tmp/demo recipes/charlm_demo.sh
#   DRY_RUN=1 recipes/charlm_demo.sh         # print the commands
#
# The model: 4 layers, 128 wide, 4 heads (longformer_lm with --decoder-layers 4 ...), windows
# growing from the bottom layer to the top one, the paper's dilation on 2 heads of the upper
# half, the paper's relative positions. Two phases instead of five, each doubling sequence and
# windows and halving the rate:
#   phase 1: 256 characters, windows 16 .. 128, 16 sequences per update, 450 updates, lr 2e-3
#   phase 2: 512 characters, windows 32 .. 256,  8 sequences per update, 150 updates, lr 1e-3
# (4,096 characters per update in both.) The evaluation runs on windows of 1,024 characters,
# twice the longest phase (relative positions have no length limit). Any setting of
# charlm_common.sh can be overridden, e.g. STEPS="1500 500" for a longer run, or
# POSITIONS=learned EVAL_TOKENS=512 for learned positions.
set -euo pipefail
CORPUS=kjv
PREPARE_FORMAT=chars
# shellcheck source=charlm_common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/charlm_common.sh"
# the project's venv (scripts/install.sh), when there is one: fairseq-train and friends on PATH
if [[ -f "${VENV:-$REPO/.venv}/bin/activate" ]]; then source "${VENV:-$REPO/.venv}/bin/activate"; fi

OUT="${OUT:-work/charlm-demo}"
DATA="${DATA:-$OUT/data}"
SAVE_DIR="${SAVE_DIR:-$OUT/checkpoints}"
PROMPT="${PROMPT:-And God said}"
SAMPLE_LENGTH="${SAMPLE_LENGTH:-300}"
export MODEL=small DECODER_LAYERS="${DECODER_LAYERS:-4}"
export MODEL_ARGS="${MODEL_ARGS:---decoder-embed-dim 128 --decoder-ffn-embed-dim 512 --decoder-attention-heads 4 --dropout 0.1}"
export PHASES="${PHASES:-1 2}" SEQ_LENGTHS="${SEQ_LENGTHS:-256 512}" BATCHES="${BATCHES:-16 8}"
export STEPS="${STEPS:-450 150}" LR="${LR:-2e-3}" WINDOW_BOTTOM="${WINDOW_BOTTOM:-16}" WINDOW_TOP="${WINDOW_TOP:-128}"
export MAX_POSITIONS="${MAX_POSITIONS:-512}" PRECISION=fp32 CPU=1 CHECKPOINT_ACTIVATIONS=0
# on a CPU one batch of 8 sequences is much faster than 8 batches of one
export BATCH_PER_GPU="${BATCH_PER_GPU:-8}" EVAL_BATCH="${EVAL_BATCH:-8}"
export EVAL_TOKENS="${EVAL_TOKENS:-1024}" EVAL_SCORED="${EVAL_SCORED:-128}" EVAL_SUBSET=valid
export NUM_WORKERS=0 LOG_INTERVAL="${LOG_INTERVAL:-50}" SAVE_INTERVAL_UPDATES="${SAVE_INTERVAL_UPDATES:-1000}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"

PREPARE_INPUTS=("$REPO"/data/kjv/*.txt)
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  charlm_main
  exit 0
fi
mkdir -p "$OUT"
charlm_settings  # here too: the pipeline below runs charlm_main in a subshell
charlm_main 2>&1 | tee "$OUT/log.txt"

unigram=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['unigram_bits_per_char']['valid'])" "$DATA/chars.json")
model=$(sed -n 's/.*Loss (base 2): \([0-9.]*\).*/\1/p' "$OUT/log.txt" | tail -1)
echo
echo "valid bits per character: unigram baseline $unigram, longformer_lm $model"

symbols=$("$PYTHON" -c "import sys; from longformer_preprocessing.chars import text_to_symbols as t; print(t(sys.argv[1]))" "$PROMPT")
last=${PHASES##* }
sample=$(echo "$symbols" | fairseq-interactive "$DATA" --path "$SAVE_DIR/phase$last/checkpoint_last.pt" \
  --user-dir "$USER_DIR" --task language_modeling --sampling --sampling-topk 10 --beam 1 \
  --max-len-b "$SAMPLE_LENGTH" --cpu --seed 1 2>/dev/null | sed -n 's/^H-0\t[^\t]*\t//p')
echo "sample (step-by-step decoding with the bounded cache):"
"$PYTHON" -c "import sys; from longformer_preprocessing.chars import symbols_to_text as t; print(t(sys.argv[1]))" "$sample"
