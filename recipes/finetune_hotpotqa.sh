#!/usr/bin/env bash
# HotpotQA (distractor setting) with the paper's settings, from the published JSON files:
#
#   longformer-prepare-task hotpotqa --train hotpot_train_v1.1.json --valid hotpot_dev_distractor_v1.json \
#     --destdir data-bin/hotpotqa --max-input-tokens 4096 \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/hotpotqa RESTORE=longformer/model.pt bash recipes/finetune_hotpotqa.sh
#   DATA=data-bin/hotpotqa RESTORE=longformer/model.pt TWO_STAGE=1 TRAIN_JSON=hotpot_train_v1.1.json \
#     VALID_JSON=hotpot_dev_distractor_v1.json \
#     PREPARE_ARGS="--gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe" bash recipes/finetune_hotpotqa.sh
#
# One stage (the default): all ten paragraphs in one 4,096-token input, <s> [q] question [/q]
# <t> title </t> sentence [s] ..., global attention on the question, titles and sentence markers;
# one head gives the answer span, the question type (span / yes / no), supporting paragraphs and
# supporting sentences, the four losses added with equal weights (--span-loss-weight,
# --type-loss-weight, --paragraph-loss-weight, --sentence-loss-weight). Validation logs the
# official answer, supporting-fact and joint EM/F1, the evidence decoded from exactly two
# paragraphs (--evidence-decoding threshold: the unconstrained decoding); the best checkpoint is
# the one with the best joint F1.
# TWO_STAGE=1, the paper's reported system (its appendix): stage one as above (SAVE_DIR/stage1);
# longformer-select-paragraphs runs its best checkpoint over TRAIN_JSON and VALID_JSON and keeps
# the paragraphs scoring above -3.0, at most 5 (SELECT_ARGS: --threshold, --max-paragraphs), into
# SAVE_DIR/selected; longformer-prepare-task prepares them with stage one's tokenizer and
# dictionary (DATA/spm.model and DATA/dict.txt when DATA has them, else PREPARE_ARGS must name
# the tokenizer) into SAVE_DIR/data_stage2; stage two trains a new model from RESTORE on them
# (SAVE_DIR/stage2) with the same settings.
# Settings (recipes/finetune.sh does the work): lr 5e-5, batch 32, 5 epochs, 1,000 warmup updates
# then linear decay, Adam, fp16 on a GPU (the paper's appendix table of QA hyperparameters, its
# Table 14; the appendix's HotpotQA text says instead that "LR of 3e-5 and 5 epochs" worked best:
# LR=3e-5 for that reading), dropout and attention dropout 0.1 (RoBERTa's).
# CPU=1: a smoke run on CPU. DRY_RUN=1: print the commands (of both stages with TWO_STAGE=1).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/recipes/finetune_defaults.sh"
export LR="${LR:-5e-5}" MAX_EPOCH="${MAX_EPOCH:-5}"
export SAVE_DIR="${SAVE_DIR:-checkpoints/finetune_hotpotqa}"
FINETUNE=(bash "$REPO/recipes/finetune.sh" hotpotqa "${DEVICE_ARGS[@]}" --warmup-updates "${WARMUP_UPDATES:-1000}")
if [[ "${TWO_STAGE:-0}" != 1 ]]; then
  exec "${FINETUNE[@]}" "$@"
fi

DATA="${DATA:?set DATA to a folder written by longformer-prepare-task hotpotqa}"
TRAIN_JSON="${TRAIN_JSON:?TWO_STAGE=1: set TRAIN_JSON to the training file DATA was prepared from}"
VALID_JSON="${VALID_JSON:?TWO_STAGE=1: set VALID_JSON to the validation file DATA was prepared from}"
STAGE1="$SAVE_DIR/stage1" SELECTED="$SAVE_DIR/selected" DATA2="$SAVE_DIR/data_stage2" STAGE2="$SAVE_DIR/stage2"
if [[ -f "$DATA/spm.model" ]]; then
  TOKENIZER=(--sentencepiece-model "$DATA/spm.model" --srcdict "$DATA/dict.txt")
else
  # shellcheck disable=SC2206
  TOKENIZER=(${PREPARE_ARGS:?TWO_STAGE=1: DATA has no spm.model: set PREPARE_ARGS to the tokenizer flags of stage one} --srcdict "$DATA/dict.txt")
fi
CPU_FLAG=()
[[ "${CPU:-0}" == 1 ]] && CPU_FLAG=(--cpu)
# shellcheck disable=SC2206
SELECT=(longformer-select-paragraphs --checkpoint "$STAGE1/checkpoint_best.pt" --data "$DATA"
  --split "train=$TRAIN_JSON" --split "valid=$VALID_JSON" --destdir "$SELECTED" --overwrite "${CPU_FLAG[@]}" ${SELECT_ARGS:-})
PREPARE=(longformer-prepare-task hotpotqa --train "$SELECTED/train.json" --valid "$SELECTED/valid.json"
  --destdir "$DATA2" --overwrite --max-input-tokens "${MAX_POSITIONS:-4096}" "${TOKENIZER[@]}")

echo "stage one: $STAGE1"
SAVE_DIR="$STAGE1" "${FINETUNE[@]}" "$@"
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${SELECT[@]}"; echo
  printf '%q ' "${PREPARE[@]}"; echo
  echo "stage two: $STAGE2 (train examples counted from stage one's data: selection keeps every question)"
  STATS="$DATA/stats.json" DATA="$DATA2" SAVE_DIR="$STAGE2" "${FINETUNE[@]}" "$@"
  exit 0
fi
"${SELECT[@]}"
"${PREPARE[@]}"
echo "stage two: $STAGE2"
DATA="$DATA2" SAVE_DIR="$STAGE2" "${FINETUNE[@]}" "$@"
