#!/usr/bin/env bash
# Hyperpartisan news detection (SemEval-2019 task 4, by-article) with the paper's settings:
#
#   longformer-prepare-task hyperpartisan --articles articles-training-byarticle-20181122.xml \
#     --labels ground-truth-training-byarticle-20181122.xml --destdir data-bin/hyperpartisan \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/hyperpartisan RESTORE=longformer/model.pt bash recipes/finetune_hyperpartisan.sh
#
# The 645 labeled articles are split 80/10/10 (train/valid/test, seed 1: --split-seed) by the
# reader, as the paper does (the task's own test set is hidden). Settings (recipes/finetune.sh
# does the work): lr 3e-5, batch 32, 15 epochs, linear warmup over 10% of the updates (our choice)
# then linear decay, Adam, 4,096 wordpieces, global attention on <s>, fp16 on a GPU. With 516
# training articles an epoch is 17 updates: the paper reports the mean over seeds for this
# small set; run with SEED=1..5 to do the same.
# CPU=1: a smoke run on CPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/finetune_defaults.sh"  # REPO, DEVICE_ARGS, finetune_dataset
export LR="${LR:-3e-5}" MAX_EPOCH="${MAX_EPOCH:-15}" WARMUP_PERCENT="${WARMUP_PERCENT:-10}"
finetune_dataset classification hyperpartisan "$@"
