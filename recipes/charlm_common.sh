# shellcheck shell=bash
# The paper's staged training of the character-level Longformer (longformer_lm), shared by
# charlm_text8.sh, charlm_enwik8.sh and charlm_demo.sh (each sets its defaults, sources this file
# and calls charlm_main; a launcher sets CORPUS and PREPARE_FORMAT, the demo also
# PREPARE_INPUTS, the files longformer-preprocess-chars prepares into DATA when DATA/dict.txt is
# missing, RAW otherwise). Never run on its own.
#
# The paper (Beltagy et al. 2020, section 4.2 and appendix B, Table 12): 5 phases; each phase
# doubles the sequence length and the attention windows and halves the learning rate, and starts
# from the previous phase's weights. Within a phase the rate is constant after a linear warmup
# of 10% of the phase's updates (at most 10K). AdamW (fairseq's adam: decoupled weight decay),
# weight decay 0.01, gradient clipping 0.25, dropout 0.2 (small) / 0.4 (large).
#
#   phase  sequence  windows (bottom .. top)  lr          batch  updates small / large
#   1      2,048     32 .. 8,192              2.5e-4      32     430K / 350K
#   2      4,096     64 .. 16,384             1.25e-4     32      50K /  25K
#   3      8,192     128 .. 32,768            6.25e-5     16      50K /  10K
#   4      16,384    256 .. 65,536            3.125e-5    16      35K /   5K
#   5      23,040    512 .. 131,072           1.5625e-5   16       5K /   5K
#
# (The update counts are Table 12's as read for this recipe; every column is an env var below.)
# Windows grow geometrically from the bottom layer to the top one (models/longformer_lm.py);
# a window is capped at its phase's sequence length, where it already sees every earlier
# character (the same function, less work). Dilation: the paper's, on 2 heads of the upper half
# (the architecture's default). Positions: the paper's, Transformer-XL's relative positions
# (--relative-positions, POSITIONS=relative): no parameter depends on the length or the
# window, so every phase loads the previous one's weights as they are, and the evaluation runs
# at 32,256, beyond the longest phase. POSITIONS=learned instead gives the model MAX_POSITIONS
# learned rows from phase 1 on (so the phases still share weights), and no length beyond them.
#
# Sequences per update (the arithmetic printed for every phase):
#   BATCH (the phase's column) = BATCH_PER_GPU x NGPUS x UPDATE_FREQ; UPDATE_FREQ is derived,
#   and the recipe stops when it is not a whole number. Characters per update = BATCH x sequence
#   (phase 1: 32 x 2,048 = 65,536).
#
# Evaluation as the paper's: fairseq-eval-lm over windows of EVAL_TOKENS characters moving by
# EVAL_SCORED, scoring only the last EVAL_SCORED of each (--tokens-per-sample EVAL_TOKENS
# --context-window EVAL_TOKENS-EVAL_SCORED); "Loss (base 2)" is bits per character. The paper's
# 32,256 is beyond the trained 23,040: relative positions evaluate there; with learned ones the
# default is MAX_POSITIONS, the longest length they have rows for.
#
# Environment variables (default):
#   DATA=data-bin/$CORPUS    fairseq binary dataset of characters (longformer-preprocess-chars)
#   RAW                      the raw corpus (text8.zip / enwik8.zip); prepared into DATA when
#                            DATA/dict.txt does not exist yet
#   MODEL=small              small | large (longformer_lm_small 12 layers / _large 30 layers)
#   SAVE_DIR=checkpoints/charlm_$CORPUS_$MODEL   one folder per phase inside
#   PHASES="1 2 3 4 5"       which phases to run (a finished phase is skipped: phaseN/.done)
#   SEQ_LENGTHS="2048 4096 8192 16384 23040"
#   BATCHES="32 32 16 16 16"
#   STEPS                    updates per phase (small / large as in the table)
#   LR=2.5e-4                phase 1's rate, halved in each later phase
#   WINDOW_BOTTOM=32 WINDOW_TOP=8192   phase 1's windows, doubled in each later phase
#   POSITIONS=relative       relative (the paper's: --relative-positions) | learned
#   MAX_POSITIONS=23040      learned position rows (the longest phase); POSITIONS=learned only
#   WARMUP_FRACTION=0.1 WARMUP_MAX=10000
#   WEIGHT_DECAY=0.01 CLIP_NORM=0.25
#   NGPUS=1 BATCH_PER_GPU=1  fairseq-train uses every visible GPU; NGPUS is for the arithmetic
#   PRECISION=fp16           fp16 | bf16 | fp32 (bf16 on compute capability >= 8.0, see docs/precision.md;
#                            CPU: fp32, with CPU=1)
#   CPU=0                    1: --cpu
#   CHECKPOINT_ACTIVATIONS=1
#   MODEL_ARGS=              more model flags (e.g. --decoder-layers 4 --decoder-embed-dim 128)
#   DECODER_LAYERS           the model's layers, for the windows (default: the architecture's)
#   EVAL_TOKENS=32256 (learned: MAX_POSITIONS) EVAL_SCORED=512 EVAL_SUBSET=test EVAL_BATCH=1
#   SAVE_INTERVAL_UPDATES=5000 LOG_INTERVAL=100 NUM_WORKERS=2 SEED=1
#   EXTRA_ARGS=              more fairseq-train flags, appended last (split on spaces)
#   DRY_RUN=0                1: print every phase's command (and the evaluation), run nothing

set -euo pipefail

RECIPES_DIR="${RECIPES_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
REPO="${REPO:-$(cd "$RECIPES_DIR/.." && pwd)}"
# the project's interpreter even when the venv is not activated (CI runs the tests that way)
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

charlm_die() {
  echo "error: $*" >&2
  exit 1
}

charlm_settings() {
  MODEL="${MODEL:-small}"
  case "$MODEL" in
    small) ARCH=longformer_lm_small; ARCH_LAYERS=12; DEFAULT_STEPS="430000 50000 50000 35000 5000" ;;
    large) ARCH=longformer_lm_large; ARCH_LAYERS=30; DEFAULT_STEPS="350000 25000 10000 5000 5000" ;;
    *) charlm_die "MODEL=$MODEL: must be small or large" ;;
  esac
  SAVE_DIR="${SAVE_DIR:-checkpoints/charlm_${CORPUS}_$MODEL}"
  PHASES="${PHASES:-1 2 3 4 5}"
  SEQ_LENGTHS="${SEQ_LENGTHS:-2048 4096 8192 16384 23040}"
  BATCHES="${BATCHES:-32 32 16 16 16}"
  STEPS="${STEPS:-$DEFAULT_STEPS}"
  LR="${LR:-2.5e-4}"
  WINDOW_BOTTOM="${WINDOW_BOTTOM:-32}"
  WINDOW_TOP="${WINDOW_TOP:-8192}"
  POSITIONS="${POSITIONS:-relative}"
  MAX_POSITIONS="${MAX_POSITIONS:-23040}"
  WARMUP_FRACTION="${WARMUP_FRACTION:-0.1}"
  WARMUP_MAX="${WARMUP_MAX:-10000}"
  WEIGHT_DECAY="${WEIGHT_DECAY:-0.01}"
  CLIP_NORM="${CLIP_NORM:-0.25}"
  NGPUS="${NGPUS:-1}"
  BATCH_PER_GPU="${BATCH_PER_GPU:-1}"
  PRECISION="${PRECISION:-fp16}"
  CPU="${CPU:-0}"
  CHECKPOINT_ACTIVATIONS="${CHECKPOINT_ACTIVATIONS:-1}"
  MODEL_ARGS="${MODEL_ARGS:-}"
  DECODER_LAYERS="${DECODER_LAYERS:-$ARCH_LAYERS}"
  case "$POSITIONS" in
    relative) EVAL_TOKENS="${EVAL_TOKENS:-32256}" ;;  # the paper's evaluation length
    learned) EVAL_TOKENS="${EVAL_TOKENS:-$MAX_POSITIONS}" ;;
    *) charlm_die "POSITIONS=$POSITIONS: must be relative or learned" ;;
  esac
  EVAL_SCORED="${EVAL_SCORED:-512}"
  EVAL_SUBSET="${EVAL_SUBSET:-test}"
  EVAL_BATCH="${EVAL_BATCH:-1}"
  SAVE_INTERVAL_UPDATES="${SAVE_INTERVAL_UPDATES:-5000}"
  LOG_INTERVAL="${LOG_INTERVAL:-100}"
  NUM_WORKERS="${NUM_WORKERS:-2}"
  SEED="${SEED:-1}"
  EXTRA_ARGS="${EXTRA_ARGS:-}"
  DRY_RUN="${DRY_RUN:-0}"
  USER_DIR="${USER_DIR:-$REPO/fairseq_longformer}"
  DATA="${DATA:-data-bin/$CORPUS}"
  # the raw files to prepare into DATA: the demo sets them, the corpora take RAW
  declare -p PREPARE_INPUTS &> /dev/null || PREPARE_INPUTS=(${RAW:+"$RAW"})
  read -r -a SEQ_ARRAY <<< "$SEQ_LENGTHS"
  read -r -a BATCH_ARRAY <<< "$BATCHES"
  read -r -a STEP_ARRAY <<< "$STEPS"
  local n=${#SEQ_ARRAY[@]}
  (( ${#BATCH_ARRAY[@]} == n && ${#STEP_ARRAY[@]} == n )) ||
    charlm_die "SEQ_LENGTHS, BATCHES and STEPS must give one value per phase ($n, ${#BATCH_ARRAY[@]}, ${#STEP_ARRAY[@]})"
  local p
  for p in $PHASES; do
    [[ "$p" =~ ^[1-9][0-9]*$ ]] && (( p <= n )) || charlm_die "PHASES: $p is not a phase of 1..$n"
  done
  local name
  for name in MAX_POSITIONS NGPUS BATCH_PER_GPU WINDOW_BOTTOM WINDOW_TOP EVAL_TOKENS EVAL_SCORED EVAL_BATCH DECODER_LAYERS; do
    [[ "${!name}" =~ ^[1-9][0-9]*$ ]] || charlm_die "$name=${!name}: must be a positive integer"
  done
  (( EVAL_SCORED < EVAL_TOKENS )) || charlm_die "EVAL_SCORED=$EVAL_SCORED must be below EVAL_TOKENS=$EVAL_TOKENS"
  [[ "$POSITIONS" == relative ]] || (( EVAL_TOKENS <= MAX_POSITIONS )) ||
    charlm_die "EVAL_TOKENS=$EVAL_TOKENS exceeds the model's MAX_POSITIONS=$MAX_POSITIONS learned positions" \
               "(POSITIONS=relative has no such limit)"
}

# Prints the per-phase windows, one comma-separated line per phase: the model's own rule
# (growing_windows), the phase-1 range doubled per phase, capped at the phase's length.
charlm_windows() {
  "$PYTHON" - "$DECODER_LAYERS" "$WINDOW_BOTTOM" "$WINDOW_TOP" "${SEQ_ARRAY[@]}" <<'EOF'
import sys
from fairseq_longformer.models.longformer_lm import growing_windows
layers, bottom, top, *lengths = map(int, sys.argv[1:])
for phase, length in enumerate(lengths):
    print(",".join(map(str, growing_windows(layers, bottom << phase, top << phase, cap=length))))
EOF
}

# Prints a command shell-quoted (DRY_RUN=1) or runs it.
charlm_run() {
  if [[ "$DRY_RUN" == 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
  else
    "$@"
  fi
}

charlm_main() {
  charlm_settings
  if [[ ! -f "$DATA/dict.txt" ]]; then
    (( ${#PREPARE_INPUTS[@]} )) || charlm_die "DATA=$DATA has no dict.txt and RAW is not set: give the raw corpus to prepare"
    echo "# prepare the $CORPUS characters"
    charlm_run longformer-preprocess-chars --format "$PREPARE_FORMAT" "${PREPARE_INPUTS[@]}" --destdir "$DATA"
  fi
  local precision=() checkpointing=() cpu=() extra=() model_args=() positions=()
  case "$PRECISION" in
    fp16) precision=(--fp16) ;;
    bf16) precision=(--bf16) ;;
    fp32) ;;
    *) charlm_die "PRECISION=$PRECISION: must be fp16, bf16 or fp32" ;;
  esac
  [[ "$CHECKPOINT_ACTIVATIONS" == 1 ]] && checkpointing=(--checkpoint-activations)
  [[ "$CPU" == 1 ]] && cpu=(--cpu)
  if [[ "$POSITIONS" == relative ]]; then
    positions=(--relative-positions)
  else
    positions=(--max-target-positions "$MAX_POSITIONS")
  fi
  read -r -a extra <<< "$EXTRA_ARGS"
  read -r -a model_args <<< "$MODEL_ARGS"
  [[ "$DECODER_LAYERS" != "$ARCH_LAYERS" ]] && model_args+=(--decoder-layers "$DECODER_LAYERS")
  local windows
  mapfile -t windows < <(charlm_windows)

  local p i seq batch steps lr warmup per_step update_freq dir previous
  for p in $PHASES; do
    i=$((p - 1))
    seq=${SEQ_ARRAY[$i]} batch=${BATCH_ARRAY[$i]} steps=${STEP_ARRAY[$i]}
    lr=$(awk -v lr="$LR" -v i="$i" 'BEGIN { printf "%.6g", lr / 2 ^ i }')
    warmup=$(awk -v s="$steps" -v f="$WARMUP_FRACTION" -v m="$WARMUP_MAX" 'BEGIN { w = int(s * f); print (w < m ? w : m) }')
    per_step=$((BATCH_PER_GPU * NGPUS))
    (( batch % per_step == 0 )) ||
      charlm_die "phase $p: a batch of $batch sequences is not divisible by BATCH_PER_GPU x NGPUS = $per_step"
    update_freq=$((batch / per_step))
    [[ "$POSITIONS" == relative ]] || (( seq <= MAX_POSITIONS )) ||
      charlm_die "phase $p: sequence $seq exceeds MAX_POSITIONS=$MAX_POSITIONS"
    dir="$SAVE_DIR/phase$p"
    echo "# phase $p: sequence $seq, windows ${windows[$i]}, lr $lr, warmup $warmup of $steps updates;" \
         "$batch sequences per update = $BATCH_PER_GPU per GPU x $NGPUS GPUs x update-freq $update_freq" \
         "($((batch * seq)) characters)"
    if [[ -f "$dir/.done" ]]; then
      echo "# phase $p: done already ($dir/.done)"
      continue
    fi
    local start=()
    if (( p > 1 )); then
      previous="$SAVE_DIR/phase$((p - 1))/checkpoint_last.pt"
      # read by fairseq only while $dir has no checkpoint_last.pt: a relaunch resumes the phase
      start=(--finetune-from-model "$previous")
      [[ "$DRY_RUN" == 1 || -f "$previous" || -f "$dir/checkpoint_last.pt" ]] ||
        charlm_die "phase $p starts from $previous, which does not exist: run phase $((p - 1)) first"
    fi
    local train=(
      fairseq-train "$DATA" --user-dir "$USER_DIR" --task language_modeling --arch "$ARCH"
      "${model_args[@]}" --attention-window "${windows[$i]}" "${positions[@]}"
      --tokens-per-sample "$seq" --sample-break-mode none "${start[@]}"
      --optimizer adam --adam-betas "(0.9,0.999)" --weight-decay "$WEIGHT_DECAY" --clip-norm "$CLIP_NORM"
      --lr "$lr" --lr-scheduler fixed --warmup-updates "$warmup" --max-update "$steps"
      --batch-size "$BATCH_PER_GPU" --required-batch-size-multiple 1 --update-freq "$update_freq"
      "${precision[@]}" "${checkpointing[@]}" "${cpu[@]}"
      --save-dir "$dir" --save-interval-updates "$SAVE_INTERVAL_UPDATES" --keep-interval-updates 2
      --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL"
      --num-workers "$NUM_WORKERS" --seed "$SEED" "${extra[@]}"
    )
    charlm_run "${train[@]}"
    [[ "$DRY_RUN" == 1 ]] || touch "$dir/.done"
  done
  local last=${PHASES##* }
  echo "# evaluation: windows of $EVAL_TOKENS characters, the last $EVAL_SCORED scored; Loss (base 2) = bits per character"
  local evaluate=(
    fairseq-eval-lm "$DATA" --path "$SAVE_DIR/phase$last/checkpoint_last.pt" --user-dir "$USER_DIR"
    --gen-subset "$EVAL_SUBSET" --tokens-per-sample "$EVAL_TOKENS"
    --context-window $((EVAL_TOKENS - EVAL_SCORED)) --batch-size "$EVAL_BATCH" "${cpu[@]}"
  )
  charlm_run "${evaluate[@]}"
}
