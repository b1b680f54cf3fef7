#!/usr/bin/env bash
# Re-measure the model-level timing pages of docs/results/ that scripts/regenerate_timings.sh
# leaves out, each sized to give at least 5 timed calls in one quiet window of about 25 minutes
# of a 2-core machine, with the commit, the CPU model, the date and the load average stored
# beside the numbers; then check that every page under docs/results/ is what its data renders.
#
#   bash scripts/regenerate_pages.sh            # writes docs/results/ (run it alone on the machine)
#   SMOKE=1 OUT=/tmp/p bash scripts/regenerate_pages.sh   # tiny sizes into OUT: checks that it runs
#
# Into docs/results/ each command first waits for the 1-minute load average to fall to 1
# (longformer_common.quiet; LOAD_WAIT seconds at most, default 600) and refuses (exit 2) if it
# does not; ALLOW_LOAD=1 writes anyway, each page then opening with "Measured under load N".
#
# Pages (seconds estimated from the stored runs' own durations scaled to these sizes; those runs
# were measured beside other jobs, so a quiet machine should need less):
#   onnx_cpu               onnxruntime on the exported graph against PyTorch, 1 layer of
#                          longformer-base at 4,096 tokens, 5 runs (as before)          about 60 s
#   mlm_step_4096          masked-LM step at 4,096 tokens, ours against transformers, 5 steps,
#                          4 of longformer_base's 12 layers (sized down: 12 layers took 569 s
#                          for 3 steps; the title says 4 layers)                        about 320 s
#   led_encoder_1layer     LED encoder against BART's dense one, 1 layer, N = 4,096 and 8,192,
#                          2 threads, 5 calls (replaces led_encoder_4096_6layers and
#                          led_encoder_16384_1layer: one call each, 25 minutes per run)  about 200 s
#   charlm_step_cpu        char-LM step at 4,096 characters, Longformer against dense, 5 steps,
#                          2 threads (was 3 steps at 1 thread, 462 s)                     about 400 s
#   hf_accelerate_cpu      transformers' Longformer / LED stock against accelerate(), 1 layer of
#                          longformer-base (forward and forward+backward at 4,096, the LED encoder
#                          at 16,384, LED generation from 4,096), 2 threads, 5 runs     about 160 s
#   hf_accelerate_cpu_1thread  the same at 1 thread                                 about 300 s
#   hf_accelerate_cpu_short    the same cases on short inputs (512 tokens, the LED encoder at 1,024,
#                          generation from 512: one window or less), 2 threads        about 40 s
# Total about 1,480 s (25 minutes) of measuring, plus up to a minute before each later stage for
# the load average to fall back to 1 after the one before (each command waits for it), plus the
# page check: about 19 minutes. Each stage line prints its elapsed seconds and the load average.
# Not re-measured (each run takes 10-25 minutes alone; each page names its command and its commit):
# charlm_step_cpu_16384_ckpt, charlm_step_cpu_relative_ckpt, charlm_ablation_relative.
# Left out: the coreference step (python -m longformer_experiments.coref_small.step_time): even at
# 256 subwords a bf16 step of longformer_base with Joshi et al.'s head took 112-232 s beside other
# jobs, so 6 steps do not fit this window; its old page (one step at 4,096, load 5.3) was retired.
# shellcheck source=scripts/regenerate_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/regenerate_common.sh"

if [[ "${SMOKE:-0}" == 1 ]]; then
  onnx=(--length 256 --layers 1 --hidden 64 --heads 2 --ffn 128 --window 32 --runs 5)
  mlm=(--lengths 256 --layers 1 --hidden 64 --heads 2 --vocab 1000 --window 32 --repeats 5)
  led=(--lengths 128,256 --layers 1 --heads 2 --head-dim 16 --ffn 64 --vocab 1000 --window 32 --check-length 32
       --repeats 5)
  lm=(--lengths 256 --repeats 5)
  hf=(--length 256 --led-length 256 --gen-length 128 --new-tokens 2 --layers 1 --hidden 64 --heads 2 --ffn 128
      --window 32 --led-window 32 --runs 5)
  hf_short=("${hf[@]}")
else
  onnx=(--runs 5)
  mlm=(--lengths 4096 --layers 4 --repeats 5)
  led=(--lengths 4096,8192 --layers 1 --repeats 5)
  lm=(--lengths 4096 --repeats 5)
  hf=(--runs 5)
  hf_short=(--length 512 --led-length 1024 --gen-length 512 --runs 5)
fi
serving=(--cases longformer_forward,longformer_fwd_bwd,led_encoder_forward,led_generate)

stage onnx_cpu
longformer-bench-hf "${onnx[@]}" "${load[@]}" --cases onnx_forward --threads 2 --out-dir "$OUT" --name onnx_cpu

stage mlm_step_4096
longformer-bench-mlm "${mlm[@]}" "${load[@]}" --threads 2 --out-dir "$OUT" --name mlm_step_4096 \
  --markdown "$OUT/mlm_step_4096.md"

stage led_encoder_1layer
longformer-bench-led "${led[@]}" "${load[@]}" --threads 2 --out-dir "$OUT" --name led_encoder_1layer \
  --markdown "$OUT/led_encoder_1layer.md"

stage charlm_step_cpu
longformer-bench-lm "${lm[@]}" "${load[@]}" --threads 2 --out-dir "$OUT" --name charlm_step_cpu \
  --markdown "$OUT/charlm_step_cpu.md"

stage hf_accelerate_cpu
longformer-bench-hf "${hf[@]}" "${load[@]}" --cases longformer_forward,longformer_fwd_bwd,led_encoder_forward,led_generate,onnx_forward \
  --threads 2 --out-dir "$OUT" --name hf_accelerate_cpu

stage hf_accelerate_cpu_1thread
longformer-bench-hf "${hf[@]}" "${load[@]}" --cases longformer_forward,longformer_fwd_bwd,led_encoder_forward,led_generate,onnx_forward \
  --threads 1 --out-dir "$OUT" --name hf_accelerate_cpu_1thread

stage hf_accelerate_cpu_short
longformer-bench-hf "${hf_short[@]}" "${load[@]}" "${serving[@]}" --threads 2 --out-dir "$OUT" --name hf_accelerate_cpu_short

if [[ "$OUT" == docs/results ]]; then
  stage "every page against its data"
  python3 -m longformer_tools.report.results_pages
fi
echo "done in $(( $(date +%s) - started )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
