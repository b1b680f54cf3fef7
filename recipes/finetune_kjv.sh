#!/usr/bin/env bash
# Fine-tuning on the bundled corpus, on CPU, in minutes: both tasks of recipes/kjv_tasks.py
# (a chapter of the King James Bible is a document of about 900 tokens), a small Longformer
# trained from scratch (no pretrained model is bundled), compared with trivial baselines.
#
#   bash recipes/finetune_kjv.sh            # both tasks
#   TASKS=qa bash recipes/finetune_kjv.sh   # one
#
# 1. recipes/kjv_tasks.py         JSON lines: classification (6 parts of the Bible, 1,073 train /
#                                 116 valid chapters) and QA (a 4-word cue -> the capitalised word
#                                 after it, the chapter as context), plus baselines.json
# 2. longformer-prepare-task      sentencepiece (2,000 pieces) trained on the classification
#                                 train texts; QA reuses it and its dictionary
# 3. recipes/finetune.sh          2 layers x 128, w = 32; classification on <s> + 510 tokens,
#                                 QA in windows of 512 tokens with --doc-stride 256
#
# Environment (defaults):
#   WORK=work/finetune_kjv   TASKS="classification qa"   THREADS=2
#   CLS_UPDATES=200          QA_UPDATES=300   (updates; measured 5.6 and 2.5-11 minutes on 2 shared cores)
#
# Measured (valid): classification 87.9% accuracy, macro-F1 88.0, against 18.1% for the majority
# class. QA from scratch does NOT beat its trivial baselines in 300 updates (EM 7.4-8.3 against
# 7.4 for the most common answer and 12.0 for the most common answer present in the context):
# the cue lookup needs a pretrained model or much longer training; the run shows the pipeline.
#   GLOBAL_ATTENTION=task    NO_GLOBAL_PROJECTIONS=0   (passed to recipes/finetune.sh)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
WORK="${WORK:-work/finetune_kjv}"
TASKS="${TASKS:-classification qa}"
export OMP_NUM_THREADS="${THREADS:-2}"
source "${VENV:-$REPO/.venv}/bin/activate"

python recipes/kjv_tasks.py "$WORK/json"
[[ -f "$WORK/data/classification/stats.json" ]] || python -m longformer_preprocessing.task_data classification \
  --train "$WORK/json/classification.train.jsonl" --valid "$WORK/json/classification.valid.jsonl" \
  --train-sentencepiece 2000 --destdir "$WORK/data/classification"
[[ -f "$WORK/data/qa/stats.json" ]] || python -m longformer_preprocessing.task_data qa \
  --train "$WORK/json/qa.train.jsonl" --valid "$WORK/json/qa.valid.jsonl" \
  --sentencepiece-model "$WORK/data/classification/spm.model" \
  --srcdict "$WORK/data/classification/input0/dict.txt" --destdir "$WORK/data/qa"

export CPU=1 ARCH=longformer_base MAX_POSITIONS=512 ATTENTION_WINDOW=32 LR=1e-3 BATCH_SIZE=16
export MODEL_ARGS="--encoder-layers 2 --encoder-embed-dim 128 --encoder-ffn-embed-dim 256 --encoder-attention-heads 4"
for task in $TASKS; do
  case "$task" in
    classification) updates="${CLS_UPDATES:-200}"; extra=(--validate-interval-updates 100) ;;
    qa) updates="${QA_UPDATES:-300}"; extra=(--batch-size 8 --max-answer-tokens 8 --validate-interval-updates 150) ;;
    *) echo "unknown task $task" >&2; exit 2 ;;
  esac
  start=$SECONDS
  DATA="$WORK/data/$task" SAVE_DIR="$WORK/checkpoints/$task" MAX_EPOCH=100 DOC_STRIDE=256 \
    bash recipes/finetune.sh "$task" --max-update "$updates" --total-num-update "$updates" \
    --warmup-updates $((updates / 10)) "${extra[@]}" 2>&1 | tee "$WORK/$task.log" | grep -E "valid on|done training"
  echo "$task: $((SECONDS - start)) s"
done
echo "baselines (valid):"
cat "$WORK/json/baselines.json"
