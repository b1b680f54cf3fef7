#!/usr/bin/env bash
# HotpotQA (distractor setting) with the paper's settings, from the published JSON files:
#
#   longformer-prepare-task hotpotqa --train hotpot_train_v1.1.json --valid hotpot_dev_distractor_v1.json \
#     --destdir data-bin/hotpotqa --max-input-tokens 4096 \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/hotpotqa RESTORE=longformer/model.pt bash recipes/finetune_hotpotqa.sh
#
# The paper's single-stage model (its Table 9 without the paragraph-selection stage): all ten
# paragraphs in one 4,096-token input, <s> [q] question [/q] <t> title </t> sentence [s] ...,
# global attention on the question, titles and sentence markers; one head gives the answer span,
# the question type (span / yes / no), supporting paragraphs and supporting sentences, the four
# losses added with equal weights (--span-loss-weight, --type-loss-weight,
# --paragraph-loss-weight, --sentence-loss-weight). Validation logs the official answer,
# supporting-fact and joint EM/F1; the best checkpoint is the one with the best joint F1.
# Settings (recipes/finetune.sh does the work): lr 5e-5, batch 32, 5 epochs, 1,000 warmup updates
# then linear decay, Adam, fp16 on a GPU (the paper's appendix table of QA hyperparameters).
# CPU=1: a smoke run on CPU.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/recipes/finetune_defaults.sh"
export LR="${LR:-5e-5}" MAX_EPOCH="${MAX_EPOCH:-5}"
export SAVE_DIR="${SAVE_DIR:-checkpoints/finetune_hotpotqa}"
exec bash "$REPO/recipes/finetune.sh" hotpotqa "${DEVICE_ARGS[@]}" --warmup-updates "${WARMUP_UPDATES:-1000}" "$@"
