#!/usr/bin/env bash
# Longformer pretraining on one machine: fairseq-train starts one process per GPU itself.
#
#   DATA=data-bin/corpus ROBERTA_CKPT=roberta.base.4096.pt MODEL=base \
#     bash recipes/pretrain_single_node.sh
#   DRY_RUN=1 ... bash recipes/pretrain_single_node.sh     # print the command, run nothing
#
# Environment variables (default) of this launcher:
#   GPUS_PER_NODE=<GPUs nvidia-smi lists, else 1>
# and those of recipes/common.sh: MODEL=base, DATA, ROBERTA_CKPT, SAVE_DIR, PRECISION=fp16,
# CHECKPOINT_ACTIVATIONS=1, BATCH_PER_GPU=1, TOKENS_PER_SAMPLE=4096, TOKENS_PER_UPDATE=262144,
# LR=3e-5, WARMUP_UPDATES=500, MAX_UPDATE=65000, POWER=3, EXTRA_ARGS, DRY_RUN=0, ...
#
# Tokens per update: 4,096 x BATCH_PER_GPU x GPUS_PER_NODE x UPDATE_FREQ = 2^18, with
# UPDATE_FREQ derived (8 GPUs, batch 1: 8; one GPU: 64); an error when it is not a whole number.
# Re-running the same command resumes from $SAVE_DIR/checkpoint_last.pt.
set -euo pipefail

detect_gpus() {
  local n=0
  if command -v nvidia-smi > /dev/null 2>&1; then
    n="$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)"
  fi
  echo $((n > 0 ? n : 1))
}

NNODES=1
GPUS_PER_NODE="${GPUS_PER_NODE:-$(detect_gpus)}"
# shellcheck source=recipes/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

longformer_build_command
longformer_run "${TRAIN_CMD[@]}"
