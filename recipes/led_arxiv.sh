#!/usr/bin/env bash
# LED summarization of arXiv (Cohan et al. 2018; PubMed has the same format), from the download:
#
#   longformer-prepare-task arxiv --train arxiv-dataset/train.txt --valid arxiv-dataset/val.txt \
#     --test arxiv-dataset/test.txt --destdir data-bin/arxiv --max-source-tokens 16384 \
#     --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --srcdict bart.large/dict.txt
#   longformer-convert-bart --source bart.large --output led-large-16384 --max-positions 16384 --attention-window 512
#   DATA=data-bin/arxiv LED=led-large-16384 bash recipes/led_arxiv.sh
#
# Then decoding: fairseq-generate data-bin/arxiv --user-dir fairseq_longformer --task translation
#   --source-lang src --target-lang tgt --path checkpoints/led_arxiv/checkpoint_best.pt
#   --max-source-positions 16384 --max-target-positions 1024 --beam 4 --gen-subset test
#
# Settings: the paper's LED-large on 16K-token sources (w = 512, i.e. attention_window 1024),
# Adam, lr 3e-5, global attention on the first source token (the LED model's default); our
# choices where the paper says nothing: batch 16 documents (UPDATE_FREQ x BATCH_SIZE), 5
# epochs, 10% linear warmup then linear decay, label smoothing 0.1 (BART's fine-tuning recipe), clip 0.1, fp16, gradient checkpointing.
# CPU=1: a smoke run (fp32, batch 2, 2 updates).
#
# Environment (defaults): DATA (required), LED (required: longformer-convert-bart's folder),
#   ARCH=led_large MODEL_ARGS= (sizes of a smaller model) MAX_SOURCE=16384 MAX_TARGET=1024
#   WINDOW=512 LR=3e-5 BATCH_SIZE=1 UPDATE_FREQ=16 MAX_EPOCH=5 WARMUP_PERCENT=10
#   SAVE_DIR=checkpoints/led_arxiv SEED=1 CPU=0 DRY_RUN=0 (1: print the command)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/project_python.sh"  # REPO, PATH and PYTHON
DATA="${DATA:?set DATA to a folder written by longformer-prepare-task arxiv}"
LED="${LED:?set LED to a folder written by longformer-convert-bart}"
ARCH="${ARCH:-led_large}"
MAX_SOURCE="${MAX_SOURCE:-16384}"
MAX_TARGET="${MAX_TARGET:-1024}"
WINDOW="${WINDOW:-512}"
LR="${LR:-3e-5}"
UPDATE_FREQ="${UPDATE_FREQ:-16}"
MAX_EPOCH="${MAX_EPOCH:-5}"
WARMUP_PERCENT="${WARMUP_PERCENT:-10}"
DEVICE=()
if [[ "${CPU:-0}" == 1 ]]; then
  BATCH_SIZE="${BATCH_SIZE:-2}"; UPDATE_FREQ=1
  DEVICE=(--cpu --num-workers 0 --max-update "${MAX_UPDATE:-2}")
else
  BATCH_SIZE="${BATCH_SIZE:-1}"
  DEVICE=(--fp16 --checkpoint-activations)
fi
EXAMPLES=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["splits"]["train"]["examples"])' "$DATA/stats.json")
PER_UPDATE=$((BATCH_SIZE * UPDATE_FREQ))
TOTAL_UPDATES=$(( (EXAMPLES + PER_UPDATE - 1) / PER_UPDATE * MAX_EPOCH ))
WARMUP_UPDATES=$(( TOTAL_UPDATES * WARMUP_PERCENT / 100 ))
echo "led arxiv: $EXAMPLES train documents, $PER_UPDATE per update, $MAX_EPOCH epochs = $TOTAL_UPDATES updates ($WARMUP_UPDATES warmup)"
CMD=(fairseq-train "$DATA" --user-dir "$REPO/fairseq_longformer" --task translation --source-lang src --target-lang tgt
  --arch "$ARCH" --attention-window "$WINDOW" --max-source-positions "$MAX_SOURCE" --max-target-positions "$MAX_TARGET"
  --restore-file "$LED/model.pt" --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --optimizer adam --adam-betas "(0.9, 0.999)" --adam-eps 1e-8 --weight-decay 0.01 --clip-norm 0.1
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES" --total-num-update "$TOTAL_UPDATES"
  --max-epoch "$MAX_EPOCH" --batch-size "$BATCH_SIZE" --update-freq "$UPDATE_FREQ" --required-batch-size-multiple 1
  --dropout 0.1 --attention-dropout 0.1 --seed "${SEED:-1}" --no-epoch-checkpoints
  --save-dir "${SAVE_DIR:-checkpoints/led_arxiv}" --log-format simple --log-interval "${LOG_INTERVAL:-20}"
  "${DEVICE[@]}")
# shellcheck disable=SC2206
CMD+=(${MODEL_ARGS:-} "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
"${CMD[@]}"
