#!/usr/bin/env bash
# WikiHop with the paper's settings, from qangaroo v1.1:
#
#   longformer-prepare-task wikihop --train qangaroo_v1.1/wikihop/train.json \
#     --valid qangaroo_v1.1/wikihop/dev.json --destdir data-bin/wikihop \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/wikihop RESTORE=longformer/model.pt bash recipes/finetune_wikihop.sh
#
# Input <s> [q] question [/q] [ent] candidate [/ent] ... </s> support </s> ..., cut into 4,096-token
# chunks (each chunk repeats the question and the candidates); global attention on
# the question and the candidates; each candidate's score is the candidate head's logit at its
# [ent], averaged over the chunks; cross entropy over the candidates; validation logs accuracy.
# Settings (recipes/finetune.sh does the work; the paper's WikiHop column of its appendix table of
# hyperparameters): lr 3e-5, batch 32, 15 epochs, 200 warmup updates then linear decay, Adam,
# fp16 on a GPU. CPU=1: a smoke run on CPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/finetune_defaults.sh"  # REPO, DEVICE_ARGS, finetune_dataset
export LR="${LR:-3e-5}" MAX_EPOCH="${MAX_EPOCH:-15}"
finetune_dataset wikihop wikihop --warmup-updates "${WARMUP_UPDATES:-200}" "$@"
