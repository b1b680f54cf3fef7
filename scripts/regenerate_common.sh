# Sourced by scripts/regenerate_timings.sh and scripts/regenerate_pages.sh: the repository root as
# the working folder, the virtualenv, OUT (default docs/results), the load flags every command
# takes (LOAD_WAIT, ALLOW_LOAD=1) in the array `load`, and `stage NAME`, the line that starts a
# page with the seconds elapsed and the 1-minute load average.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=/dev/null
source "${VENV:-$REPO/.venv}/bin/activate"
OUT="${OUT:-docs/results}"
mkdir -p "$OUT"
started=$(date +%s)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (the pages record theirs; run this alone)"

load=(--load-wait "${LOAD_WAIT:-600}")
if [[ "${ALLOW_LOAD:-0}" == 1 ]]; then load+=(--allow-load); fi

stage() {
  echo "=== $1 (at $(( $(date +%s) - started )) s, load average $(cut -d' ' -f1 /proc/loadavg))"
}
