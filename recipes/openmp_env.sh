# shellcheck shell=bash
# OpenMP's wait policy for fairseq-train and the other commands a recipe runs (sourced; exports
# only). fairseq-train imports torch before it loads the plugin, so the plugin's own default
# (longformer_common/openmp.py: DEFAULTS) comes too late for it; this exports the same value
# first. libgomp's idle threads then spin briefly before sleeping instead of about a millisecond,
# so a training run beside another busy process does not lose its cores to spinning threads
# (docs/cpu.md). A wait policy of your own (OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME in
# the environment) is left as it is.
if [[ -z "${OMP_WAIT_POLICY+x}${GOMP_SPINCOUNT+x}${KMP_BLOCKTIME+x}" ]]; then
  export GOMP_SPINCOUNT=10000
fi

# The thread count of a recipe's training (docs/cpu.md): threads_from VALUE exports OMP_NUM_THREADS
# for a count, or LONGFORMER_THREADS=auto for "auto" (the plugin then sets torch's threads to the
# cores other processes leave free and re-checks every 20 updates). An OMP_NUM_THREADS already in
# the environment is the user's explicit count: the plugin lets it win over auto.
threads_from() {
  if [[ "$1" == auto ]]; then
    export LONGFORMER_THREADS=auto
  else
    export OMP_NUM_THREADS="$1"
  fi
}
