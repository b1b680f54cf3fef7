#!/usr/bin/env bash
# Longformer pretraining with fairseq-hydra-train and recipes/hydra/longformer_$MODEL.yaml, the
# precision chosen as the shell launchers choose it (recipes/common.sh, PRECISION=auto: bf16 when
# every GPU nvidia-smi lists has compute capability >= 8.0, else the yaml's and the paper's fp16).
#
#   DATA=data-bin/corpus ROBERTA_CKPT=roberta.base.4096.pt MODEL=base bash recipes/pretrain_hydra.sh \
#     [more hydra overrides, e.g. distributed_training.distributed_world_size=1 optimization.update_freq=[64]]
#   DRY_RUN=1 ... bash recipes/pretrain_hydra.sh     # print the command, run nothing
#
# Environment (default): MODEL=base, DATA, ROBERTA_CKPT, SAVE_DIR=checkpoints/longformer_$MODEL,
# PRECISION=auto (auto | bf16 | memory-efficient-bf16 | fp16 | memory-efficient-fp16 | fp32),
# FAIRSEQ_HYDRA_TRAIN=fairseq-hydra-train. Everything else is the yaml's (tokens per update 2^18 on
# 8 GPUs; its header says how to keep that on other GPU counts). Run from the repository root
# (the yaml's common.user_dir is relative).
set -euo pipefail

# shellcheck source=recipes/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
FAIRSEQ_HYDRA_TRAIN="${FAIRSEQ_HYDRA_TRAIN:-fairseq-hydra-train}"

case "$MODEL" in
  base | large) ;;
  *) longformer_die "MODEL=$MODEL: must be base or large" ;;
esac
[[ -n "$DATA" ]] || longformer_die "DATA is not set: the fairseq binary dataset (dict.txt, train.*, valid.*)"
[[ -n "$ROBERTA_CKPT" ]] || longformer_die "ROBERTA_CKPT is not set: the converted RoBERTa checkpoint (longformer-convert-roberta)"

longformer_resolve_precision
case "$PRECISION" in
  bf16) precision=(common.fp16=false common.bf16=true) ;;
  memory-efficient-bf16) precision=(common.fp16=false common.bf16=true common.memory_efficient_bf16=true) ;;
  fp16) precision=(common.fp16=true common.bf16=false) ;;
  memory-efficient-fp16) precision=(common.fp16=true common.bf16=false common.memory_efficient_fp16=true) ;;
  fp32) precision=(common.fp16=false common.bf16=false) ;;
esac

train="$(command -v "$FAIRSEQ_HYDRA_TRAIN")" || train="$FAIRSEQ_HYDRA_TRAIN"
[[ "$DRY_RUN" == 1 || -x "$train" ]] ||
  longformer_die "FAIRSEQ_HYDRA_TRAIN=$FAIRSEQ_HYDRA_TRAIN: not found on PATH (activate the virtual environment)"
longformer_run "$train" --config-dir "$RECIPES_DIR/hydra" --config-name "longformer_$MODEL" \
  "task.data=$DATA" "checkpoint.finetune_from_model=$ROBERTA_CKPT" "checkpoint.save_dir=$SAVE_DIR" \
  "${precision[@]}" "$@"
