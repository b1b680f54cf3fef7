# shellcheck shell=bash
# Shared logic of the Longformer pretraining launchers: settings, the tokens-per-update
# arithmetic and the fairseq-train flags. Sourced by pretrain_single_node.sh,
# pretrain_torchrun.sh and pretrain_slurm.sbatch (never run on its own); each launcher sets
# NNODES and GPUS_PER_NODE, sources this file, then wraps "${TRAIN_CMD[@]}" in its launcher.
#
# The paper's recipe (Beltagy et al. 2020, section 5): continue RoBERTa for 65K updates of
# 2^18 tokens (64 sequences of 4,096), lr 3e-5, linear warmup over 500 updates, then
# polynomial decay with power 3; Adam betas (0.9, 0.98), eps 1e-6, weight decay 0.01; fp16 and
# activation checkpointing; attention window 512 (two-sided), which is w = 256 here (one-sided).
#
# Tokens per update (the arithmetic every launcher prints):
#   tokens/update = TOKENS_PER_SAMPLE x BATCH_PER_GPU x WORLD_SIZE x UPDATE_FREQ
#   2^18          = 4,096             x 1             x 8          x 8   (one node of 8 GPUs)
#                 = 4,096             x 1             x 64         x 1   (8 nodes of 8 GPUs)
#                 = 4,096             x 1             x 1          x 64  (one GPU)
#   WORLD_SIZE = NNODES x GPUS_PER_NODE; UPDATE_FREQ (--update-freq, gradient accumulation) is
#   derived: TOKENS_PER_UPDATE / (TOKENS_PER_SAMPLE x BATCH_PER_GPU x WORLD_SIZE), and the
#   launcher stops with an error when that is not a whole number. These are token positions:
#   with --sample-break-mode complete_doc a block ends at a document boundary, so a block can
#   hold fewer than 4,096 real tokens (SAMPLE_BREAK_MODE=none fills every block).
#
# Environment variables (default):
#   MODEL=base                  base | large (longformer_base 12 x 768, longformer_large 24 x 1024)
#   DATA                        required: fairseq binary dataset (dict.txt, train.*, valid.*)
#   ROBERTA_CKPT                required: RoBERTa checkpoint converted by longformer-convert-roberta
#                               (positions extended to 4,096); loaded on the first launch only
#   SAVE_DIR=checkpoints/longformer_$MODEL   must be a filesystem every node sees
#   PRECISION=auto              auto | bf16 | memory-efficient-bf16 | fp16 | memory-efficient-fp16 | fp32
#                               auto: bf16 when every GPU nvidia-smi lists has compute capability
#                               >= 8.0 (A100, H100: bf16 needs no loss scaler and cannot overflow
#                               where fp16 does), else fp16 (V100 and older: no bf16 tensor cores;
#                               the paper's setting); see docs/precision.md
#   CHECKPOINT_ACTIVATIONS=1    1: --checkpoint-activations (recompute each layer in backward)
#   BATCH_PER_GPU=1             sequences per GPU per forward/backward
#   TOKENS_PER_SAMPLE=4096      block length (also --max-positions)
#   TOKENS_PER_UPDATE=262144    2^18
#   ATTENTION_WINDOW=256        one-sided window w (the paper's "512"); also --pad-to-multiple
#   SAMPLE_BREAK_MODE=complete_doc
#   LR=3e-5 WARMUP_UPDATES=500 MAX_UPDATE=65000 POWER=3 WEIGHT_DECAY=0.01 CLIP_NORM=0
#   DROPOUT=0.1                 dropout on hidden states (RoBERTa's)
#   ATTENTION_DROPOUT=0.1       dropout on attention probabilities (RoBERTa's, which the paper keeps)
#   SAVE_INTERVAL_UPDATES=500 KEEP_INTERVAL_UPDATES=3 LOG_INTERVAL=50 NUM_WORKERS=2 SEED=1
#   USER_DIR=<repo>/fairseq_longformer
#   FAIRSEQ_TRAIN=fairseq-train (looked up on PATH)
#   EXTRA_ARGS=                 more fairseq-train flags, appended last (split on spaces)
#   DRY_RUN=0                   1: print the exact command (shell-quoted) instead of running it
#
# Resuming: the command is the same on every launch. It passes --finetune-from-model
# $ROBERTA_CKPT, which fairseq reads only while $SAVE_DIR/checkpoint_last.pt does not exist, and
# then with optimizer, lr scheduler, meters and data loader reset (what --restore-file
# $ROBERTA_CKPT --reset-optimizer --reset-dataloader --reset-meters does). Once a checkpoint
# exists, fairseq resumes from it with its update number, lr and position in the data: after a
# crash, a SIGKILL, a SLURM requeue or a torchrun worker restart, start the same command again.

RECIPES_DIR="${RECIPES_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
REPO="${REPO:-$(cd "$RECIPES_DIR/.." && pwd)}"

MODEL="${MODEL:-base}"
DATA="${DATA:-}"
ROBERTA_CKPT="${ROBERTA_CKPT:-}"
SAVE_DIR="${SAVE_DIR:-checkpoints/longformer_$MODEL}"
PRECISION="${PRECISION:-auto}"
CHECKPOINT_ACTIVATIONS="${CHECKPOINT_ACTIVATIONS:-1}"
BATCH_PER_GPU="${BATCH_PER_GPU:-1}"
TOKENS_PER_SAMPLE="${TOKENS_PER_SAMPLE:-4096}"
TOKENS_PER_UPDATE="${TOKENS_PER_UPDATE:-262144}"
ATTENTION_WINDOW="${ATTENTION_WINDOW:-256}"
SAMPLE_BREAK_MODE="${SAMPLE_BREAK_MODE:-complete_doc}"
LR="${LR:-3e-5}"
WARMUP_UPDATES="${WARMUP_UPDATES:-500}"
MAX_UPDATE="${MAX_UPDATE:-65000}"
POWER="${POWER:-3}"
WEIGHT_DECAY="${WEIGHT_DECAY:-0.01}"
CLIP_NORM="${CLIP_NORM:-0}"
DROPOUT="${DROPOUT:-0.1}"
ATTENTION_DROPOUT="${ATTENTION_DROPOUT:-0.1}"
SAVE_INTERVAL_UPDATES="${SAVE_INTERVAL_UPDATES:-500}"
KEEP_INTERVAL_UPDATES="${KEEP_INTERVAL_UPDATES:-3}"
LOG_INTERVAL="${LOG_INTERVAL:-50}"
NUM_WORKERS="${NUM_WORKERS:-2}"
SEED="${SEED:-1}"
USER_DIR="${USER_DIR:-$REPO/fairseq_longformer}"
FAIRSEQ_TRAIN="${FAIRSEQ_TRAIN:-fairseq-train}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
DRY_RUN="${DRY_RUN:-0}"

longformer_die() {
  echo "error: $*" >&2
  exit 1
}

longformer_is_positive_int() {
  [[ "$1" =~ ^[1-9][0-9]*$ ]]
}

# PRECISION=auto: bf16 when nvidia-smi lists GPUs and the smallest compute capability among them
# is >= 8.0 (Ampere and later have bf16 tensor cores), fp16 otherwise (older GPUs, or no
# nvidia-smi here, e.g. a login node preparing a job: the paper's fp16).
longformer_auto_precision() {
  local capabilities lowest
  capabilities="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null)" || capabilities=""
  lowest="$(printf '%s\n' "$capabilities" | awk -F. '/^[0-9]+\.[0-9]+/ {v = $1 * 100 + $2; if (min == "" || v < min) min = v} END {print min}')"
  if [[ -n "$lowest" ]] && (( lowest >= 800 )); then
    echo bf16
  else
    echo fp16
  fi
}

# PRECISION=auto resolved (longformer_auto_precision) and checked, in place; shared by the shell
# launchers and recipes/pretrain_hydra.sh, so both pick the same precision on the same GPUs.
longformer_resolve_precision() {
  [[ "$PRECISION" == auto ]] && PRECISION="$(longformer_auto_precision)"
  case "$PRECISION" in
    bf16 | memory-efficient-bf16 | fp16 | memory-efficient-fp16 | fp32) ;;
    *) longformer_die "PRECISION=$PRECISION: must be auto, bf16, memory-efficient-bf16, fp16, memory-efficient-fp16 or fp32" ;;
  esac
  echo "precision: $PRECISION" >&2
}

# Checks the settings and fills UPDATE_FREQ, WORLD_SIZE and TRAIN_CMD (an array: the
# fairseq-train command line). Needs NNODES and GPUS_PER_NODE from the launcher.
longformer_build_command() {
  case "$MODEL" in
    base | large) ARCH="longformer_$MODEL" ;;
    *) longformer_die "MODEL=$MODEL: must be base or large" ;;
  esac
  local name
  for name in NNODES GPUS_PER_NODE BATCH_PER_GPU TOKENS_PER_SAMPLE TOKENS_PER_UPDATE ATTENTION_WINDOW; do
    longformer_is_positive_int "${!name}" || longformer_die "$name=${!name}: must be a positive integer"
  done
  [[ -n "$DATA" ]] || longformer_die "DATA is not set: the fairseq binary dataset (dict.txt, train.*, valid.*)"
  [[ -f "$DATA/dict.txt" ]] || longformer_die "DATA=$DATA: no dict.txt there (not a fairseq binary dataset)"
  # fairseq trains from random weights without a word when a --restore-file is missing; with
  # --finetune-from-model it stops, but only on the first launch: check here, every time.
  [[ -n "$ROBERTA_CKPT" ]] || longformer_die "ROBERTA_CKPT is not set: the converted RoBERTa checkpoint (longformer-convert-roberta)"
  [[ -f "$ROBERTA_CKPT" ]] || longformer_die "ROBERTA_CKPT=$ROBERTA_CKPT: no such file"

  # --- tokens per update: TOKENS_PER_SAMPLE x BATCH_PER_GPU x WORLD_SIZE x UPDATE_FREQ ---
  WORLD_SIZE=$((NNODES * GPUS_PER_NODE))
  (( TOKENS_PER_UPDATE % TOKENS_PER_SAMPLE == 0 )) ||
    longformer_die "TOKENS_PER_UPDATE=$TOKENS_PER_UPDATE is not a multiple of TOKENS_PER_SAMPLE=$TOKENS_PER_SAMPLE"
  SEQUENCES_PER_UPDATE=$((TOKENS_PER_UPDATE / TOKENS_PER_SAMPLE))
  local per_step=$((WORLD_SIZE * BATCH_PER_GPU))
  (( SEQUENCES_PER_UPDATE % per_step == 0 )) ||
    longformer_die "$SEQUENCES_PER_UPDATE sequences per update ($TOKENS_PER_UPDATE / $TOKENS_PER_SAMPLE tokens) are not divisible by WORLD_SIZE x BATCH_PER_GPU = $WORLD_SIZE x $BATCH_PER_GPU = $per_step: change BATCH_PER_GPU or the number of GPUs"
  UPDATE_FREQ=$((SEQUENCES_PER_UPDATE / per_step))
  echo "tokens per update: $TOKENS_PER_SAMPLE tokens x $BATCH_PER_GPU per GPU x $WORLD_SIZE GPUs ($NNODES x $GPUS_PER_NODE) x update-freq $UPDATE_FREQ = $((TOKENS_PER_SAMPLE * BATCH_PER_GPU * WORLD_SIZE * UPDATE_FREQ))" >&2

  longformer_resolve_precision
  local precision_args=()
  case "$PRECISION" in
    bf16) precision_args=(--bf16) ;;
    memory-efficient-bf16) precision_args=(--memory-efficient-bf16) ;;
    fp16) precision_args=(--fp16) ;;
    memory-efficient-fp16) precision_args=(--memory-efficient-fp16) ;;
    fp32) precision_args=() ;;
  esac
  local checkpoint_args=()
  case "$CHECKPOINT_ACTIVATIONS" in
    1) checkpoint_args=(--checkpoint-activations) ;;
    0) ;;
    *) longformer_die "CHECKPOINT_ACTIVATIONS=$CHECKPOINT_ACTIVATIONS: must be 0 or 1" ;;
  esac

  local train
  train="$(command -v "$FAIRSEQ_TRAIN")" || longformer_die "FAIRSEQ_TRAIN=$FAIRSEQ_TRAIN: not found on PATH (activate the virtual environment)"
  local extra=()
  read -r -a extra <<< "$EXTRA_ARGS"

  TRAIN_CMD=(
    "$train" "$DATA"
    --user-dir "$USER_DIR"
    --task longformer_mlm --criterion longformer_mlm --arch "$ARCH"
    --tokens-per-sample "$TOKENS_PER_SAMPLE" --max-positions "$TOKENS_PER_SAMPLE"
    --sample-break-mode "$SAMPLE_BREAK_MODE"
    --attention-window "$ATTENTION_WINDOW" --pad-to-multiple "$ATTENTION_WINDOW"
    --dropout "$DROPOUT" --attention-dropout "$ATTENTION_DROPOUT"
    --finetune-from-model "$ROBERTA_CKPT"
    --optimizer adam --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay "$WEIGHT_DECAY"
    --clip-norm "$CLIP_NORM"
    --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES"
    --total-num-update "$MAX_UPDATE" --max-update "$MAX_UPDATE" --power "$POWER"
    --batch-size "$BATCH_PER_GPU" --required-batch-size-multiple 1 --update-freq "$UPDATE_FREQ"
    --distributed-world-size "$WORLD_SIZE" --ddp-backend pytorch_ddp
    "${precision_args[@]}" "${checkpoint_args[@]}"
    --save-dir "$SAVE_DIR" --save-interval-updates "$SAVE_INTERVAL_UPDATES"
    --keep-interval-updates "$KEEP_INTERVAL_UPDATES" --no-epoch-checkpoints
    --log-format simple --log-interval "$LOG_INTERVAL" --num-workers "$NUM_WORKERS" --seed "$SEED"
    "${extra[@]}"
  )
}

# Prints the command shell-quoted when DRY_RUN=1, else replaces the shell with it.
longformer_run() {
  if [[ "$DRY_RUN" == 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
    return 0
  fi
  if [[ -f "$SAVE_DIR/checkpoint_last.pt" ]]; then
    echo "resuming from $SAVE_DIR/checkpoint_last.pt" >&2
  else
    echo "first launch: starting from $ROBERTA_CKPT" >&2
  fi
  exec "$@"
}
