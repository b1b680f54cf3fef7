# Sourced by the per-dataset fine-tuning recipes: GPU settings by default (fp16, the paper's
# mixed precision); CPU=1 a smoke run (fp32, batch 2, 2 updates, validation kept) unless the
# caller's environment or flags say otherwise (flags given later win in fairseq).
DEVICE_ARGS=()
if [[ "${CPU:-0}" == 1 ]]; then
  export BATCH_SIZE="${BATCH_SIZE:-2}" LOG_INTERVAL="${LOG_INTERVAL:-1}"
  DEVICE_ARGS+=(--max-update "${MAX_UPDATE:-2}")
else
  DEVICE_ARGS+=(--fp16)
fi
