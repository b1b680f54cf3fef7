#!/usr/bin/env bash
# IMDB sentiment (Maas et al. 2011) with the paper's classification settings, from the download:
#
#   tar xzf aclImdb_v1.tar.gz
#   longformer-prepare-task imdb --train aclImdb/train --valid aclImdb/test --destdir data-bin/imdb \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/imdb RESTORE=longformer/model.pt bash recipes/finetune_imdb.sh
#
# The paper fine-tunes on train and reports accuracy on test (no separate dev set), so --valid is
# aclImdb/test here. Settings (recipes/finetune.sh does the work, same environment variables):
# lr 3e-5, batch 32, 15 epochs, linear warmup over 10% of the updates then linear decay, Adam,
# inputs of 4,096 wordpieces, global attention on <s>, fp16 on a GPU. The warmup share is our
# choice where the paper gives none for classification.
# CPU=1: a smoke run on CPU (no fp16; batch 2, 2 updates unless BATCH_SIZE / extra flags say otherwise).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/finetune_defaults.sh"  # REPO, DEVICE_ARGS, finetune_dataset
export LR="${LR:-3e-5}" MAX_EPOCH="${MAX_EPOCH:-15}" WARMUP_PERCENT="${WARMUP_PERCENT:-10}"
finetune_dataset classification imdb "$@"
