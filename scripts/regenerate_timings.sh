#!/usr/bin/env bash
# Re-measure the CPU timing pages of docs/results/ that fit in about 10 minutes of a quiet
# 2-core machine, each a median and range of at least 5 timed calls, with the commit, the CPU
# model, the date and the load average stored beside the numbers; then check that every page
# under docs/results/ is what its data renders.
#
#   bash scripts/regenerate_timings.sh            # writes docs/results/ (run it alone on the machine)
#   SMOKE=1 OUT=/tmp/t bash scripts/regenerate_timings.sh   # tiny sizes into OUT: checks that it runs
#
# Into docs/results/ each command first waits for the 1-minute load average to fall to 1
# (longformer_common.quiet; LOAD_WAIT seconds at most, default 600) and refuses (exit 2) if it
# does not; ALLOW_LOAD=1 writes anyway, each page then opening with "Measured under load N".
#
# Pages (estimated from the stored runs' own durations, quiet 2-core machine):
#   attention_layer_4096   one attention layer (projections + band + output projection), N = 4,096,
#                          ours against dense SDPA and transformers, dropout 0 and 0.1, beside the
#                          matmul limit (the layer's fraction of it per round)        about 200 s
#   figure1_cpu            Figure 1 on the CPU, N = 512 .. 8,192, 0 and 8 global tokens   about 300 s
#                          (N = 16,384 alone takes 10 minutes more: `longformer-bench --lengths 16384 ...`)
#   core_dropout           attention dropout's cost in the core, fused and eager mask, 15 rounds  about 40 s
#   attention_layer_4096_profile  where that layer's time goes at dropout 0.1 (torch.profiler's
#                          operator self times by group, the matmuls' own rate), its fraction of
#                          the peak and the gap to the 75% target, 5 timed + 5 profiled calls  about 40 s
#   attention_layer_4096_busy  the same layer, ours against dense SDPA, quiet and then beside one
#                          spin process (--busy 1): each one's slowdown, ours' speedup over dense
#                          in both conditions, 7 rounds                             about 150 s
#   train_step_quickstart_busy.json  the main job's model (recipes/quickstart.sh: 3 layers x 128,
#                          1,024 tokens, batch 2), ours against a dense-SDPA RoBERTa, a training
#                          step's tokens/s quiet and beside one spin process, 7 steps   about 60 s
#   train_step_quickstart_omp  the same model's training step (ours alone) under three OpenMP wait
#                          policies (libgomp's default, which the project runs under, passive, a
#                          1,000 spin, the two a user may export): quiet tokens/s, the ratio to
#                          libgomp's default, and the slowdown beside one spin process at the
#                          quiet thread count; 5 rounds of one fresh process per policy, 15 steps
#                          each                                                      about 240 s
# The two busy stages run under the thread policy the recipes use, --threads auto (the cores other
# processes leave free, measured when each condition starts, the same count for every contender;
# docs/cpu.md); each page states the policy and the counts. An OMP_NUM_THREADS in the environment
# overrides it (an explicit count always wins): unset it to measure the policy.
# Every longformer-bench page states its fractions against the matmul peak measured in the same
# run (large square products); a fraction above 100% stops that command (exit 3, nothing written).
# Not re-measured here: the whole-model pages (char-LM step, LED encoder, masked-LM step, ONNX,
# coreference step), sized for their own quiet window by scripts/regenerate_pages.sh.
# shellcheck source=scripts/regenerate_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/regenerate_common.sh"
if [[ -n "${OMP_NUM_THREADS:-}" ]]; then
  echo "note: OMP_NUM_THREADS=$OMP_NUM_THREADS overrides every stage's --threads default and the busy stages' auto"
fi

if [[ "${SMOKE:-0}" == 1 ]]; then
  layer=(--lengths 256 --heads 2 --head-dim 16 --window 16 --repeats 5 --quiet-wait 0 --peak-sizes 128,256)
  figure=(--lengths 128,256 --heads 2 --head-dim 16 --window 16 --repeats 5 --quiet-wait 0 --peak-sizes 128,256)
  core=(--length 256 --heads 2 --head-dim 16 --window 16 --rounds 5 --quiet-below 99)
  profile=(--length 256 --heads 2 --head-dim 16 --window 16 --calls 5 --peak-sizes 128,256)
  busy_layer=(--lengths 256 --heads 2 --head-dim 16 --window 16 --repeats 5 --quiet-wait 0 --peak-sizes 128,256)
  train=(--size tiny --repeats 5)
  omp=(--size tiny --repeats 1 --omp-rounds 1 --omp-variants libgomp-default,passive,spin1000)
else
  layer=(--lengths 4096 --time-cap 60 --quiet-wait 60)
  figure=(--lengths 512,1024,2048,4096,8192 --time-cap 60 --quiet-wait 60)
  core=(--rounds 15)
  profile=(--calls 5)
  busy_layer=(--lengths 4096 --time-cap 60 --quiet-wait 60 --repeats 7)
  train=(--size quickstart --repeats 7)
  omp=(--size quickstart --repeats 15 --omp-rounds 5 --omp-variants libgomp-default,passive,spin1000)
fi

stage attention_layer_4096
longformer-bench "${layer[@]}" "${load[@]}" --impls dense torch hf --global-tokens 0 --dropout 0 0.1 --device cpu \
  --output-projection --out-dir "$OUT" --name attention_layer_4096 --markdown "$OUT/attention_layer_4096.md"

stage figure1_cpu
longformer-bench "${figure[@]}" "${load[@]}" --impls dense torch hf --global-tokens 0 8 --dropout 0 --device cpu \
  --out-dir "$OUT" --name figure1_cpu --markdown "$OUT/figure1_cpu.md"

stage core_dropout
python3 -m longformer_tools.bench.core_dropout "${core[@]}" "${load[@]}" --json "$OUT/core_dropout.json" \
  --markdown "$OUT/core_dropout.md"

stage attention_layer_4096_profile
python3 -m longformer_tools.bench.layer_profile "${profile[@]}" "${load[@]}" \
  --json "$OUT/attention_layer_4096_profile.json" --markdown "$OUT/attention_layer_4096_profile.md"

stage attention_layer_4096_busy
longformer-bench "${busy_layer[@]}" "${load[@]}" --impls dense torch --global-tokens 0 --dropout 0 --device cpu \
  --output-projection --busy 1 --threads auto --out-dir "$OUT" --name attention_layer_4096_busy \
  --markdown "$OUT/attention_layer_4096_busy.md"

stage train_step_quickstart_busy
rm -f "$OUT/train_step_quickstart_busy.json"  # train-steps writes only a new file
longformer-bench train-steps "${train[@]}" "${load[@]}" --device cpu --rows longformer_mlm,roberta_sdpa_mlm \
  --checkpointing off --max-batch 2 --threads auto --busy 1 --out "$OUT/train_step_quickstart_busy.json"

stage train_step_quickstart_omp
rm -f "$OUT/train_step_quickstart_omp.json" "$OUT/train_step_quickstart_omp.md"  # written only as new files
longformer-bench train-steps "${omp[@]}" "${load[@]}" --device cpu --rows longformer_mlm --checkpointing off \
  --max-batch 2 --threads auto --busy 1 --out "$OUT/train_step_quickstart_omp.json"

if [[ "$OUT" == docs/results ]]; then
  stage "every page against its data"
  python3 -m longformer_tools.report.results_pages
fi
echo "done in $(( $(date +%s) - started )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
