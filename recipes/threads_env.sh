# shellcheck shell=bash
# The thread count of a recipe's training (docs/cpu.md), sourced; defines threads_from only.
# threads_from VALUE exports OMP_NUM_THREADS for a count, or LONGFORMER_THREADS=auto for "auto"
# (the plugin then sets torch's threads to the cores other processes leave free and re-checks
# every 20 updates). An OMP_NUM_THREADS already in the environment is the user's explicit count:
# the plugin lets it win over auto.
threads_from() {
  if [[ "$1" == auto ]]; then
    export LONGFORMER_THREADS=auto
  else
    export OMP_NUM_THREADS="$1"
  fi
}
