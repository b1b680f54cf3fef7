# Sourced by the per-dataset fine-tuning recipes: REPO (this folder's parent); GPU settings by
# default (fp16, the paper's mixed precision); CPU=1 a smoke run (fp32, batch 2, 2 updates,
# validation kept) unless the caller's environment or flags say otherwise (flags given later win
# in fairseq); and finetune_dataset, which hands the run to recipes/finetune.sh.
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEVICE_ARGS=()
if [[ "${CPU:-0}" == 1 ]]; then
  export BATCH_SIZE="${BATCH_SIZE:-2}" LOG_INTERVAL="${LOG_INTERVAL:-1}"
  DEVICE_ARGS+=(--max-update "${MAX_UPDATE:-2}")
else
  DEVICE_ARGS+=(--fp16)
fi

# finetune_dataset TASK DATASET [flags]: exec recipes/finetune.sh TASK with the device flags above
# and the flags given, saving to SAVE_DIR (default checkpoints/finetune_DATASET).
finetune_dataset() {
  export SAVE_DIR="${SAVE_DIR:-checkpoints/finetune_$2}"
  exec bash "$REPO/recipes/finetune.sh" "$1" "${DEVICE_ARGS[@]}" "${@:3}"
}
