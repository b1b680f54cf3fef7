#!/usr/bin/env bash
# The pieces every GPU script shares, sourced by scripts/gpu_check.sh, scripts/gpu_round.sh and
# the lease scripts (tools/gpu/leases/). The caller sets PYTHON; stage and parallel_checks also
# read OUT (the output folder), start (SECONDS at the beginning) and HAS_CUDA (1 or 0).

# link_dir="$(link_packages REPO)": a temporary folder holding the repository's folders linked
# under their import names (common -> longformer_common, kernels -> longformer_kernels, tools ->
# longformer_tools), for PYTHONPATH: a bare GPU image with torch and triton then runs
# longformer_tools.gpu from THIS checkout, nothing installed, the repository only read.
link_packages() {
  local repo=$1 dir
  dir="$(mktemp -d)"
  ln -s "$repo/common" "$dir/longformer_common"
  ln -s "$repo/kernels" "$dir/longformer_kernels"
  ln -s "$repo/tools" "$dir/longformer_tools"
  echo "$dir"
}

stage() {  # stage NAME LIMIT command...
  local name=$1 limit=$2
  shift 2
  echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"
  timeout "$limit" "$@"
  echo "=== $name: rc $? at $((SECONDS - start)) s"
}

# Checks: six processes side by side (production shapes and the grid, one dtype each): the grid's
# float64 dense reference runs on the host CPU, and one process ran out of 170 s where six took
# 94-114 s (H200 host, 16 cores). Their logs follow in order; their JSONs merge into checks.json.
# Without CUDA (HAS_CUDA=0), gpu_check runs its CPU smoke (its own two tiny cases) once instead.
parallel_checks() {  # parallel_checks NAME LIMIT CASES...: one process per (cases, dtype)
  local name=$1 limit=$2 pids="" part dtype pid rc=0
  shift 2
  echo "=== $name (limit ${limit} s, at $((SECONDS - start)) s)"
  [[ $HAS_CUDA == 1 ]] || set -- "cpu-smoke"
  for part in "$@"; do
    for dtype in fp32 fp16 bf16; do
      local args=(--skip-bench --dtypes "$dtype" --cases "$part")
      [[ $part == cpu-smoke ]] && args=(--skip-bench ${CHECK_CASES:+--cases "$CHECK_CASES"})  # CI narrows it
      OMP_NUM_THREADS=2 timeout "$limit" "$PYTHON" -m longformer_tools.gpu.gpu_check "$OUT/$name/${part%%_*}_$dtype" \
        "${args[@]}" > "$OUT/$name.${part%%_*}_$dtype.log" 2>&1 &
      pids="$pids $!"
      [[ $part == cpu-smoke ]] && break
    done
  done
  for pid in $pids; do  # a bare wait would also wait for the tee above, which never ends
    wait "$pid" || rc=$?
  done
  for f in "$OUT/$name".*.log; do echo "--- $f"; cat "$f"; rm -f "$f"; done
  "$PYTHON" - "$OUT/$name" <<'PY'
import glob, json, os, shutil, sys
folder = sys.argv[1]
merged = {os.path.basename(os.path.dirname(p)): json.load(open(p))
          for p in sorted(glob.glob(os.path.join(folder, "*", "gpu_check.json")))}
records = [r for report in merged.values() for r in report["checks"]]
for part in merged:
    shutil.rmtree(os.path.join(folder, part))
json.dump(merged, open(os.path.join(folder, "checks.json"), "w"), indent=1)
print(f"checks merged: {len(merged)} reports, {len(records)} records, {sum(not r['ok'] for r in records)} failed")
PY
  echo "=== $name: rc $rc at $((SECONDS - start)) s"
}
