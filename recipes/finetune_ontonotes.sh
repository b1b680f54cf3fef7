#!/usr/bin/env bash
# OntoNotes coreference (CoNLL-2012) with the paper's settings: Longformer-base reading each
# document whole (4,096 positions), the coarse-to-fine head of Joshi et al. (2019):
#
#   longformer-prepare-task ontonotes --train conll-2012/v4/data/train --valid conll-2012/v4/data/development \
#     --test conll-2012/v4/data/test --destdir data-bin/ontonotes \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict longformer/dict.txt
#   DATA=data-bin/ontonotes RESTORE=longformer/model.pt bash recipes/finetune_ontonotes.sh
#   SEGMENT_LENGTH=384 ... bash recipes/finetune_ontonotes.sh     # the RoBERTa baseline's segments
#
# Settings (recipes/finetune.sh does the work):
#   paper:         encoder lr 1e-5 (LR), head lr 1e-4 (HEAD_LR_MULTIPLIER=10 x LR), whole documents
#                  (SEGMENT_LENGTH=0: the model's 4,096 positions; 384 for the RoBERTa baseline)
#   Joshi et al.:  one document per update (BATCH_SIZE=1), 20 epochs (MAX_EPOCH), 10% warmup then
#                  linear decay, Adam (betas 0.9/0.999, eps 1e-6), weight decay 0.01, gradients
#                  clipped at 1.0, head dropout 0.3, spans <= 30 subwords, 0.4 spans per subword
#                  (<= 3,900), 50 antecedents, depth-2 refinement, FFNN 3000 (the task's defaults),
#                  encoder dropout and attention dropout 0.1 (DROPOUT, ATTENTION_DROPOUT: its BERT
#                  configs'; the paper: "All other hyperparameters were the same as in the original
#                  implementation"), segment-distance buckets following SEGMENT_LENGTH (3 at 384)
#   here:          fp16 on a GPU, <s> of each segment global
# Every validation logs MUC, B3, CEAF-e and conll_f1 (the best checkpoint's metric); WRITE_CONLL=DIR
# also writes DIR/valid.response_conll and DIR/valid.key_conll for the official scorer or
# longformer-coref-score. DRY_RUN=1 prints the command; CPU=1 is a smoke run on CPU.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/recipes/finetune_defaults.sh"
export LR="${LR:-1e-5}" MAX_EPOCH="${MAX_EPOCH:-20}" BATCH_SIZE="${BATCH_SIZE:-1}" WARMUP_PERCENT="${WARMUP_PERCENT:-10}"
export SEGMENT_LENGTH="${SEGMENT_LENGTH:-0}" HEAD_LR_MULTIPLIER="${HEAD_LR_MULTIPLIER:-10}"
export SAVE_DIR="${SAVE_DIR:-checkpoints/finetune_ontonotes}"
# --fp16-no-flatten-grads: fp16's flat parameter copy would fold the head's own learning rate away
EXTRA=(--adam-betas "(0.9, 0.999)" --coref-dropout 0.3 --fp16-no-flatten-grads)
[[ -n "${WRITE_CONLL:-}" ]] && EXTRA+=(--write-conll "$WRITE_CONLL")
exec bash "$REPO/recipes/finetune.sh" coref "${DEVICE_ARGS[@]}" "${EXTRA[@]}" "$@"
