#!/usr/bin/env bash
# TriviaQA (Wikipedia setting) with the paper's settings, from triviaqa-rc.tar.gz:
#
#   longformer-prepare-task triviaqa --train qa/wikipedia-train.json --valid qa/wikipedia-dev.json \
#     --evidence evidence/wikipedia --destdir data-bin/triviaqa \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/triviaqa RESTORE=longformer/model.pt bash recipes/finetune_triviaqa.sh
#
# Training pages are cut to 4,096 wordpieces by the reader (--max-train-context-tokens); the
# loss sums the probability of every occurrence of every alias (log-sum-exp over the gold starts
# and over the gold ends, Clark and Gardner's noisy supervision); global attention on <s> and the
# question; validation reads every dev page whole, in overlapping windows (DOC_STRIDE), scoring
# EM/F1 with TriviaQA's normalization against the normalized aliases.
# Settings (recipes/finetune.sh does the work): lr 3e-5, batch 32, 5 epochs, 1,000 warmup
# updates then linear decay, Adam, 4,096-token windows, fp16 on a GPU.
# CPU=1: a smoke run on CPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/finetune_defaults.sh"  # REPO, DEVICE_ARGS, finetune_dataset
export LR="${LR:-3e-5}" MAX_EPOCH="${MAX_EPOCH:-5}" DOC_STRIDE="${DOC_STRIDE:-1024}"
finetune_dataset qa triviaqa --warmup-updates "${WARMUP_UPDATES:-1000}" "$@"
