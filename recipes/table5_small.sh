#!/usr/bin/env bash
# The shape of the paper's Table 5 (MLM BPC when continuing RoBERTa as Longformer), in small,
# on CPU, in one command (about 15-25 minutes on two shared cores):
#
#   bash recipes/table5_small.sh                   # results in checkpoints/table5_small/
#   OUT=/tmp/t5 LENGTH=16 ROBERTA_UPDATES=4000 bash recipes/table5_small.sh   # faster, weaker copy
#   bash recipes/table5_small.sh --help            # every flag of longformer_experiments.table5_small
#
# Steps (experiments/table5_small/ has the details): tokenize the bundled KJV corpus
# with a small sentencepiece BPE model (every 10th book held out); pretrain a small RoBERTa with
# stock fairseq on blocks of LENGTH tokens; convert it with longformer-convert-roberta to
# 4 x LENGTH positions (window w = LENGTH / 2, one-sided) with random and with copied positions;
# continue MLM pretraining (scored after SHORT_UPDATES and LONG_UPDATES) and train only the new
# positions (FROZEN_UPDATES); score every model on the held-out books.
#
# Environment variables (unset: the experiment's default, shown here):
#   OUT=checkpoints/table5_small   work folder, recreated; table5.md, table5.json, logs/ there
#   LENGTH=32                      RoBERTa's block length; Longformer's is 4 x LENGTH
#   LAYERS=2 DIM=64 HEADS=4        model size (FFN 4 x DIM)
#   TOKENIZER=sentencepiece VOCAB=256
#   BATCH_TOKENS=1024              token positions per update, every run:
#                                  RoBERTa 32 x 32 = Longformer 128 x 8 = 1,024
#   ROBERTA_UPDATES=8000 SHORT_UPDATES=250 LONG_UPDATES=2000 FROZEN_UPDATES=250
#   THREADS=1                      intra-op threads per process (more is slower on a shared box)
#   PYTHON=<repo>/.venv/bin/python when it exists, else python3
# Extra arguments go to python -m longformer_experiments.table5_small last. Exit status 1 when the table lacks the paper's shape
# (copy closer to RoBERTa than random, 5x closer without the tile-start tokens; continued
# pretraining better than the copy): see REQUIRED_CHECKS in experiments/table5_small/table.py.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

ARGS=(--out "${OUT:-checkpoints/table5_small}")
# shellcheck source=recipes/env_flags.sh
source "$REPO/recipes/env_flags.sh"
flags_from_env LENGTH LAYERS DIM HEADS TOKENIZER VOCAB BATCH_TOKENS ROBERTA_UPDATES \
  SHORT_UPDATES LONG_UPDATES FROZEN_UPDATES THREADS

cd "$REPO"
exec "$PYTHON" -m longformer_experiments.table5_small "${ARGS[@]}" "$@"
