# shellcheck shell=bash
# Environment variables to command-line flags, for the recipes that wrap a Python script with
# its own defaults (global_ablation.sh, charlm_ablation.sh, table5_small.sh): each starts an
# array ARGS, calls flags_from_env with the variables it takes, and passes "${ARGS[@]}" to the
# script, so a variable left unset or empty leaves the script's default in force. Sourced, never
# run on its own; defines nothing else (recipes/common.sh is the pretraining launchers' shared
# logic and sets their defaults when sourced, so these recipes do not source it).

# flags_from_env NAME...: for each variable NAME that is set and not empty, appends the flag named
# after it (lower case, "_" -> "-": BATCH_SIZE -> --batch-size) and its value to the array ARGS.
flags_from_env() {
  local name flag
  for name in "$@"; do
    if [[ -n "${!name:-}" ]]; then
      flag="--${name,,}"
      ARGS+=("${flag//_/-}" "${!name}")
    fi
  done
}
