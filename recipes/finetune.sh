#!/usr/bin/env bash
# Fine-tune a Longformer on data from longformer-prepare-task: long-document classification,
# extractive QA, HotpotQA or WikiHop, global attention on the task's tokens (classification <s>, QA
# the question, HotpotQA the question, titles and sentence markers, WikiHop the question and the
# candidates).
#
#   DATA=data-bin/imdb RESTORE=longformer.pt bash recipes/finetune.sh classification [flags]
#   DATA=data-bin/triviaqa RESTORE=longformer.pt bash recipes/finetune.sh qa [flags]
#   DATA=data-bin/hotpotqa RESTORE=longformer.pt bash recipes/finetune.sh hotpotqa [flags]
#   DATA=data-bin/wikihop RESTORE=longformer.pt bash recipes/finetune.sh wikihop [flags]
#
# The paper's settings are the defaults (Beltagy et al. 2020, appendix D; allenai scripts): Adam,
# lr 3e-5, linear warmup then linear decay, batch 32; 15 epochs for classification (IMDB,
# Hyperpartisan) and WikiHop, 5 for QA (TriviaQA, HotpotQA); inputs of 4,096 tokens; w = 256 (the
# paper's "512"). Dropout and attention dropout 0.1: appendix D keeps RoBERTa's (WikiHop: "Other
# hyperparameters (dropout, weight decay) were identical to RoBERTa pretraining"; TriviaQA: "All
# other hyperparameters are similar to RoBERTa's"; coreference: "the same as in the original
# implementation", whose BERT configs have 0.1 for both); RoBERTa fine-tunes with 0.1 for both.
# The total number of updates (for the lr schedule) is derived from the examples in stats.json:
#   updates = ceil(train examples / BATCH_SIZE) x MAX_EPOCH,  warmup = WARMUP_PERCENT % of them.
#
# Environment (defaults):
#   DATA                      required: a folder written by longformer-prepare-task
#   STATS=$DATA/stats.json    where the train examples are counted (DRY_RUN of a two-stage run)
#   RESTORE=                  a Longformer checkpoint (pretrained, or longformer-convert-roberta's);
#                             loaded as --finetune-from-model (optimizer, meters, data reset), the
#                             head is new. Empty: train from scratch (tests, the KJV recipe)
#   SAVE_DIR=checkpoints/finetune_<task>
#   ARCH=longformer_base      MODEL_ARGS=   (e.g. "--encoder-layers 2 ..." for a small model)
#   MAX_POSITIONS=4096        ATTENTION_WINDOW=256 (one-sided; also --pad-to-multiple)
#   GLOBAL_ATTENTION=task     task | none
#   NO_GLOBAL_PROJECTIONS=0   1: global attention through Q, K, V (the "no linear proj." ablation)
#   LR=3e-5 BATCH_SIZE=32 UPDATE_FREQ=1 MAX_EPOCH=15 (qa, hotpotqa: 5) WARMUP_PERCENT=10
#   DROPOUT=0.1 ATTENTION_DROPOUT=0.1
#   DOC_STRIDE=1024 (qa)      context tokens between two windows' starts
#   CPU=0                     1: --cpu
#   SEED=1 LOG_INTERVAL=20    DRY_RUN=0 (1: print the command)
# Extra arguments are appended to fairseq-train's (the last one given wins).
set -euo pipefail

TASK="${1:?usage: recipes/finetune.sh classification|qa|hotpotqa|wikihop|coref [fairseq-train flags]}"
shift
case "$TASK" in
  classification) METRIC=accuracy; DEFAULT_EPOCHS=15; TASK_ARGS=() ;;
  qa) METRIC=f1; DEFAULT_EPOCHS=5; TASK_ARGS=(--doc-stride "${DOC_STRIDE:-1024}") ;;
  hotpotqa) METRIC=joint_f1; DEFAULT_EPOCHS=5; TASK_ARGS=() ;;
  wikihop) METRIC=accuracy; DEFAULT_EPOCHS=15; TASK_ARGS=() ;;
  coref) METRIC=conll_f1; DEFAULT_EPOCHS=20
    TASK_ARGS=(--segment-length "${SEGMENT_LENGTH:-0}" --head-lr-multiplier "${HEAD_LR_MULTIPLIER:-10}") ;;
  *) echo "recipes/finetune.sh: task must be classification, qa, hotpotqa, wikihop or coref, got '$TASK'" >&2; exit 2 ;;
esac
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/recipes/project_python.sh"
DATA="${DATA:?set DATA to a folder written by longformer-prepare-task}"
RESTORE="${RESTORE:-}"
SAVE_DIR="${SAVE_DIR:-checkpoints/finetune_$TASK}"
ARCH="${ARCH:-longformer_base}"
MAX_POSITIONS="${MAX_POSITIONS:-4096}"
ATTENTION_WINDOW="${ATTENTION_WINDOW:-256}"
GLOBAL_ATTENTION="${GLOBAL_ATTENTION:-task}"
LR="${LR:-3e-5}"
BATCH_SIZE="${BATCH_SIZE:-32}"
UPDATE_FREQ="${UPDATE_FREQ:-1}"
MAX_EPOCH="${MAX_EPOCH:-$DEFAULT_EPOCHS}"
WARMUP_PERCENT="${WARMUP_PERCENT:-10}"
DROPOUT="${DROPOUT:-0.1}"
ATTENTION_DROPOUT="${ATTENTION_DROPOUT:-0.1}"
SEED="${SEED:-1}"
LOG_INTERVAL="${LOG_INTERVAL:-20}"

EXAMPLES=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["splits"]["train"]["examples"])' "${STATS:-$DATA/stats.json}")
PER_UPDATE=$((BATCH_SIZE * UPDATE_FREQ))
TOTAL_UPDATES=$(( (EXAMPLES + PER_UPDATE - 1) / PER_UPDATE * MAX_EPOCH ))
WARMUP_UPDATES=$(( TOTAL_UPDATES * WARMUP_PERCENT / 100 ))
echo "finetune $TASK: $EXAMPLES train examples, $PER_UPDATE per update, $MAX_EPOCH epochs = $TOTAL_UPDATES updates ($WARMUP_UPDATES warmup)"

CMD=(fairseq-train "$DATA" --user-dir "$REPO/fairseq_longformer"
  --task "longformer_$TASK" --criterion "longformer_$TASK" --arch "$ARCH"
  --max-positions "$MAX_POSITIONS" --attention-window "$ATTENTION_WINDOW" --pad-to-multiple "$ATTENTION_WINDOW"
  --global-attention "$GLOBAL_ATTENTION" "${TASK_ARGS[@]}"
  --optimizer adam --adam-betas "(0.9, 0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES" --total-num-update "$TOTAL_UPDATES"
  --max-epoch "$MAX_EPOCH" --batch-size "$BATCH_SIZE" --update-freq "$UPDATE_FREQ" --required-batch-size-multiple 1
  --dropout "$DROPOUT" --attention-dropout "$ATTENTION_DROPOUT" --seed "$SEED"
  --best-checkpoint-metric "$METRIC" --maximize-best-checkpoint-metric --no-epoch-checkpoints
  --save-dir "$SAVE_DIR" --log-format simple --log-interval "$LOG_INTERVAL")
# fairseq reads --finetune-from-model only while SAVE_DIR has no checkpoint_last.pt (then with
# optimizer, lr schedule, meters and data loader reset): the same command resumes a killed run
[[ -n "$RESTORE" ]] && CMD+=(--finetune-from-model "$RESTORE")
[[ "${NO_GLOBAL_PROJECTIONS:-0}" == 1 ]] && CMD+=(--no-global-projections)
[[ "${CPU:-0}" == 1 ]] && CMD+=(--cpu --num-workers 0)
# shellcheck disable=SC2206
CMD+=(${MODEL_ARGS:-} "$@")

if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
"${CMD[@]}"
