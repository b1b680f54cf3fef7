#!/usr/bin/env bash
# The LED seq2seq demo on the bundled corpus, on CPU, in minutes: a small BART pretrained here
# with stock fairseq, converted to an LED, fine-tuned on sources 2-3x longer than the BART's
# positions, and scored with ROUGE against a lead baseline and against the same BART fine-tuned
# on the same sources cut to its own positions.
#
#   bash recipes/led_demo.sh                # everything under work/led_demo
#
# 1. led_demo build             the task (python -m longformer_experiments.led_demo build; its
#                                docstring says why this one): a passage of a book, 2-3 x
#                                POSITIONS sentencepiece tokens -> its closing sentence; books split into train / valid / test; the denoising
#                                corpus (train books, one sentence per line)
# 2. fairseq-preprocess          binaries; one dictionary for the BART and both fine-tunings
# 3. fairseq-train --task denoising --arch bart_base, small sizes, POSITIONS positions (stock
#                                fairseq: text infilling, 30% of the tokens in Poisson spans)
#    longformer-convert-bart     the BART -> an LED with 3 x POSITIONS encoder positions (BART's
#                                tiled) and a one-sided window WINDOW
# 4. fairseq-train --task translation, twice, same settings and updates:
#                                LED on whole sources; the BART (stock bart_base) with
#                                --truncate-source --max-source-positions POSITIONS
# 5. fairseq-generate (beam BEAM) on test, then led_demo score: ROUGE-1/2/L F1 (rouge-score) of
#                                the lead baseline, the BART and the LED -> $WORK/results.md and
#                                results.json
# A finished step is skipped on a re-run (data, binaries, pretraining, fine-tunings; conversion,
# generation and scoring run again): delete $WORK to start over.
#
# Environment (defaults):
#   WORK=work/led_demo  THREADS=1 (torch threads; more is slower on a shared machine)
#   POSITIONS=256       the BART's positions; sources are 2-3x this (256, not BART's 1,024 or
#                       512: at 512 one pretraining update took about 2 s of a shared core and
#                       the demo would not fit in minutes)
#   WINDOW=POSITIONS/2  the LED's one-sided window (half the BART's positions, as in the
#                       paper: w = 512 for BART's 1,024)
#   PRETRAIN_UPDATES=400  FINETUNE_UPDATES=300  BEAM=4
#   MAX_TRAIN=0 MAX_EVAL=0  cap the train passages / the valid and test passages per book
#                       (0: all; the test uses small caps)
#
# Measured here (defaults; 2 cores shared with other jobs, load average 15-20; 24 minutes of
# wall clock, of which pretraining 8, the LED 9.5, the BART 4): ROUGE-L on 94 test passages,
# lead 14.4, BART cut to 256 tokens 18.4, LED 19.7. Neither model learnt to copy the closing
# sentence in this budget: both write short generic verses ("And the LORD ..."), which beat the
# lead's long first sentence; the LED's +1.3 over the BART has a 95% interval that includes 0.
# The README's LED section has the table.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/project_python.sh"  # REPO, and python3 the project's
cd "$REPO"
WORK="${WORK:-work/led_demo}"
POSITIONS="${POSITIONS:-256}"
WINDOW="${WINDOW:-$((POSITIONS / 2))}"
PRETRAIN_UPDATES="${PRETRAIN_UPDATES:-400}"
FINETUNE_UPDATES="${FINETUNE_UPDATES:-300}"
BEAM="${BEAM:-4}"
export OMP_NUM_THREADS="${THREADS:-1}"
PLUGIN="$REPO/fairseq_longformer"
DATA="$WORK/data"
BIN="$WORK/bin"
LED_POSITIONS=$((3 * POSITIONS))
LANGS=(--source-lang src --target-lang tgt)
# Pre-layernorm: measured here, post-layernorm (BART's own) stayed on the unigram plateau (8.3
# bits) for all 300 updates of a first try; pre-layernorm left it after about 100.
SIZES=(--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 --decoder-embed-dim 128
       --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-attention-heads 4
       --decoder-attention-heads 4 --encoder-normalize-before --decoder-normalize-before)
COMMON=(--optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0
        --dropout 0.1 --attention-dropout 0.0 --cpu --num-workers 0 --seed 1 --log-format simple
        --log-interval 25 --no-epoch-checkpoints --max-epoch 1000)
mkdir -p "$WORK"
demo_start=$SECONDS
step() { echo; echo "== $* ($((SECONDS - demo_start)) s)"; }
finished() { [[ -f "$1" ]] && grep -q "done training" "$1"; }

python3 -c "import rouge_score" 2>/dev/null || { echo "rouge-score is missing: run scripts/install.sh (or pip install rouge-score)" >&2; exit 2; }

step "1. the task: passages of 2-3 x $POSITIONS tokens -> their closing sentence ($DATA)"
if [[ ! -f "$DATA/stats.json" ]]; then
  python3 -m longformer_experiments.led_demo build "$WORK" --positions "$POSITIONS" --max-train "${MAX_TRAIN:-0}" \
    --max-eval "${MAX_EVAL:-0}"
else
  cat "$DATA/stats.json"
fi

step "2. fairseq-preprocess: the denoising corpus and the passage pairs, one dictionary ($BIN)"
if [[ ! -f "$BIN/pairs/test.src-tgt.tgt.bin" ]]; then
  fairseq-preprocess --only-source --trainpref "$DATA/pretrain/train.txt" --validpref "$DATA/pretrain/valid.txt" \
    --destdir "$BIN/pretrain" --workers 1 > "$WORK/preprocess.log" 2>&1
  fairseq-preprocess "${LANGS[@]}" --trainpref "$DATA/train" --validpref "$DATA/valid" --testpref "$DATA/test" \
    --destdir "$BIN/pairs" --srcdict "$BIN/pretrain/dict.txt" --joined-dictionary --workers 1 >> "$WORK/preprocess.log" 2>&1
fi
grep -h "| \[src\] .*test.src" "$WORK/preprocess.log" || true

step "3a. pretrain a small BART with stock fairseq (denoising, $POSITIONS positions, $PRETRAIN_UPDATES updates)"
if ! finished "$WORK/bart_pretrain.log"; then
  start=$SECONDS
  fairseq-train "$BIN/pretrain" --task denoising --arch bart_base "${SIZES[@]}" \
    --tokens-per-sample "$POSITIONS" --max-source-positions "$POSITIONS" --max-target-positions "$POSITIONS" \
    --mask 0.3 --mask-random 0.1 --mask-length span-poisson --poisson-lambda 3.5 --replace-length 1 \
    --permute-sentences 0 --rotate 0 --insert 0 --criterion cross_entropy \
    --lr 2e-3 --lr-scheduler polynomial_decay --warmup-updates $((PRETRAIN_UPDATES / 10)) \
    --total-num-update "$PRETRAIN_UPDATES" --max-update "$PRETRAIN_UPDATES" --batch-size 8 \
    --disable-validation --save-dir "$WORK/checkpoints/bart_pretrain" "${COMMON[@]}" \
    > "$WORK/bart_pretrain.log" 2>&1 || finished "$WORK/bart_pretrain.log"
  echo "pretraining: $((SECONDS - start)) s"
fi
echo "train (last epoch, bits per token): $(grep -E "\| train \|" "$WORK/bart_pretrain.log" | tail -1 \
  | grep -oE "\| (loss|ppl|wps) [0-9.]+" | tr -d '|' | paste -sd,)"
mkdir -p "$WORK/bart"
cp "$WORK/checkpoints/bart_pretrain/checkpoint_last.pt" "$WORK/bart/model.pt"
cp "$BIN/pretrain/dict.txt" "$WORK/bart/dict.txt"

step "3b. longformer-convert-bart: $POSITIONS -> $LED_POSITIONS encoder positions, window $WINDOW"
longformer-convert-bart --source "$WORK/bart" --output "$WORK/led" --max-positions "$LED_POSITIONS" \
  --attention-window "$WINDOW" --overwrite > "$WORK/convert.log" 2>&1
grep "^wrote" "$WORK/convert.log"

# finetune NAME SOURCE_POSITIONS FLAGS...: the same settings for both models
finetune() {
  local name="$1" positions="$2" start=$SECONDS
  shift 2
  if ! finished "$WORK/$name.log"; then
    fairseq-train "$BIN/pairs" --task translation "${LANGS[@]}" --user-dir "$PLUGIN" "${SIZES[@]}" "$@" \
      --max-source-positions "$positions" --max-target-positions "$POSITIONS" \
      --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
      --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
      --lr 1e-3 --lr-scheduler polynomial_decay --warmup-updates $((FINETUNE_UPDATES / 10)) \
      --total-num-update "$FINETUNE_UPDATES" --max-update "$FINETUNE_UPDATES" --batch-size 8 \
      --validate-interval-updates "$FINETUNE_UPDATES" --save-dir "$WORK/checkpoints/$name" "${COMMON[@]}" \
      > "$WORK/$name.log" 2>&1 || finished "$WORK/$name.log"
    echo "$name: $((SECONDS - start)) s"
  fi
  echo "$name valid: $(grep -E "\| valid on" "$WORK/$name.log" | tail -1 | grep -oE "\| (loss|nll_loss|ppl) [0-9.]+" \
    | tr -d '|' | paste -sd,)"
}

step "4a. fine-tune the LED on whole sources (up to $LED_POSITIONS tokens), $FINETUNE_UPDATES updates"
finetune led "$LED_POSITIONS" --arch led_base --attention-window "$WINDOW" --restore-file "$WORK/led/model.pt"

step "4b. fine-tune the same BART on sources cut to its $POSITIONS positions, $FINETUNE_UPDATES updates"
finetune bart_truncated "$POSITIONS" --arch bart_base --truncate-source --restore-file "$WORK/bart/model.pt"

step "5. fairseq-generate on test (beam $BEAM), then ROUGE"
for name in led bart_truncated; do
  if [[ "$name" == led ]]; then positions=$LED_POSITIONS; extra=(); else positions=$POSITIONS; extra=(--truncate-source); fi
  fairseq-generate "$BIN/pairs" --task translation "${LANGS[@]}" --user-dir "$PLUGIN" \
    --path "$WORK/checkpoints/$name/checkpoint_last.pt" --gen-subset test "${extra[@]}" \
    --max-source-positions "$positions" --max-target-positions "$POSITIONS" --required-batch-size-multiple 1 \
    --batch-size 8 --beam "$BEAM" --max-len-b 60 --cpu --num-workers 0 > "$WORK/generate_$name.log" 2>&1
  grep -E "^Generate test" "$WORK/generate_$name.log" || true
done
python3 -m longformer_experiments.led_demo score "$WORK" --system "BART, sources cut to $POSITIONS=$WORK/generate_bart_truncated.log" \
  --system "LED, whole sources=$WORK/generate_led.log" \
  --regenerate "WORK=$WORK POSITIONS=$POSITIONS WINDOW=$WINDOW PRETRAIN_UPDATES=$PRETRAIN_UPDATES FINETUNE_UPDATES=$FINETUNE_UPDATES BEAM=$BEAM MAX_TRAIN=${MAX_TRAIN:-0} MAX_EVAL=${MAX_EVAL:-0} bash recipes/led_demo.sh"
echo "demo: $((SECONDS - demo_start)) s; results in $WORK/results.md"
