#!/usr/bin/env bash
# Longformer pretraining on several machines with torchrun and a c10d rendezvous.
# Run the same command on every node (node ranks are assigned by the rendezvous):
#
#   NNODES=4 GPUS_PER_NODE=8 RDZV_ENDPOINT=node0.cluster:29500 \
#   DATA=/shared/data-bin ROBERTA_CKPT=/shared/roberta.base.4096.pt SAVE_DIR=/shared/ckpt \
#     bash recipes/pretrain_torchrun.sh
#   DRY_RUN=1 ... bash recipes/pretrain_torchrun.sh       # print the command, run nothing
#
# Environment variables (default) of this launcher:
#   NNODES=1                    number of machines
#   GPUS_PER_NODE=8             processes (GPUs) per machine
#   RDZV_ENDPOINT=${MASTER_ADDR:-localhost}:${MASTER_PORT:-29500}   host:port of the c10d
#                               rendezvous store, reachable from every node (the first node
#                               to arrive hosts it when it runs on that host)
#   RDZV_ID=longformer_$MODEL   one id per job: every node of a job must use the same
#   MAX_RESTARTS=0              torchrun restarts of the workers; a restarted worker resumes
#                               from $SAVE_DIR/checkpoint_last.pt (the command is unchanged)
#   TORCHRUN=torchrun
# and those of recipes/common.sh (MODEL, DATA, ROBERTA_CKPT, SAVE_DIR, PRECISION, BATCH_PER_GPU, ...).
#
# Tokens per update: 4,096 x BATCH_PER_GPU x (NNODES x GPUS_PER_NODE) x UPDATE_FREQ = 2^18,
# UPDATE_FREQ derived; an error when it is not a whole number. The world size is passed to
# fairseq explicitly (--distributed-world-size): without it, fairseq on nodes with a single
# visible GPU would run independent single-process trainings without any error.
# SAVE_DIR must be a filesystem every node sees (rank 0 writes, every rank checks it on start).
set -euo pipefail

NNODES="${NNODES:-1}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
# shellcheck source=recipes/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
RDZV_ENDPOINT="${RDZV_ENDPOINT:-${MASTER_ADDR:-localhost}:${MASTER_PORT:-29500}}"
RDZV_ID="${RDZV_ID:-longformer_$MODEL}"
MAX_RESTARTS="${MAX_RESTARTS:-0}"
TORCHRUN="${TORCHRUN:-torchrun}"

longformer_build_command
TORCHRUN_PATH="$(command -v "$TORCHRUN")" || longformer_die "TORCHRUN=$TORCHRUN: not found on PATH"
longformer_run "$TORCHRUN_PATH" \
  --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" \
  --rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id "$RDZV_ID" \
  --max-restarts "$MAX_RESTARTS" \
  "${TRAIN_CMD[@]}"
