"""The Triton kernels build for real GPUs, with the tiles GPUs use: checked on a CPU.

``python -m longformer_tools.gpu.compile_table`` compiles, of every configuration the launchers can
choose (``launch_configurations()``: 7 kernels x fp16 / bf16 / fp32 x BLOCK_D 16..256 x their
causal / dropout / band-bias / dilation / global-keys switches, with ``block_config``'s GPU
tiles), the covering subset of ``compiled_configurations()`` (every kernel x dtype x tile set in
full, each switch on and off, every pair of switches in all four combinations) for sm_80, sm_86,
sm_89 and sm_90, down to PTX and a cubin (Triton's ptxas), in a process of its own (the kernel
module must be imported without TRITON_INTERPRET). This test fails if any compile fails or needs
more shared memory per block than the target allows; register spills are printed, not judged.

Cost: 780 compiles of 1-10 s each, about half an hour cold on 2 cores. Results are
cached by Triton version, kernel source hash (the kernel and everything it calls), configuration
and target (``LONGFORMER_COMPILE_CACHE``, default ~/.cache/longformer_kernels/), so a run
recompiles only what changed; a warm run takes seconds. The results of the kernels as committed
are kept in tests/kernels/triton_compile_results.json (``--write-seed``), so a checkout with
unchanged device code passes without compiling. ``LONGFORMER_COMPILE_KERNELS=band_fwd_kernel,...``
checks only those kernels (quicker while editing one).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import longformer_kernels.triton_attention as kernels  # noqa: E402  (conftest chose the interpreter)

REPO = Path(__file__).resolve().parents[2]


def test_every_launch_configuration_builds_for_gpus(tmp_path):
    out = tmp_path / "records.json"
    env = dict(os.environ, TRITON_INTERPRET="0")
    command = [sys.executable, "-m", "longformer_tools.gpu.compile_table", "--json", str(out), "--jobs", "2", "--quiet"]
    cache = os.environ.get("LONGFORMER_COMPILE_CACHE")
    if cache is not None:
        command += ["--cache", cache]
    subset = [k for k in os.environ.get("LONGFORMER_COMPILE_KERNELS", "").split(",") if k]
    if subset:
        command += ["--kernels", ",".join(subset)]
    run = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
    print(run.stdout)  # the table: shared memory and spills per kernel and target
    records = json.loads(out.read_text()) if out.exists() else []
    assert records, f"the compile script produced no records:\n{run.stderr[-5000:]}"

    failures = [f"sm_{r['cap']} {r['name']}: {r['error']}" for r in records if r["error"]]
    overflows = [f"sm_{r['cap']} {r['name']}: {r['shared']} B shared > {r['limit']} B"
                 for r in records if not r["error"] and r["shared"] > r["limit"]]
    spills = sorted(((r["spill_stores"], r["cap"], r["name"]) for r in records
                     if not r["error"] and r["spill_stores"]), reverse=True)
    print(f"{len(records)} compiles; {len(spills)} of them spill registers, the most:")
    for stores, cap, name in spills[:15]:
        print(f"  sm_{cap} {name}: {stores} bytes of spill stores")
    assert not failures, "kernels that do not compile:\n" + "\n".join(failures[:20])
    assert not overflows, "kernels beyond the target's shared memory:\n" + "\n".join(overflows[:20])

    expected = 4 * sum(1 for c in _compiled_configurations() if not subset or c in subset)
    assert len(records) == expected, f"{len(records)} records, expected {expected} (4 targets)"
    assert run.returncode == 0, run.stderr[-5000:]


def _compiled_configurations():
    """Kernel names of compile_table.compiled_configurations(), asked of a process of its own
    (importing compile_table turns the interpreter off for the importing process)."""
    code = ("import json; from longformer_tools.gpu.compile_table import compiled_configurations as c; "
            "print(json.dumps([x.kernel.strip('_') for x in c()]))")
    run = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TRITON_INTERPRET="0"),
                         capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


COVERING = """
import itertools, json
from longformer_tools.gpu.compile_table import compiled_configurations
from longformer_kernels.triton_attention import KERNEL_FLAGS, launch_configurations
chosen = compiled_configurations()
full = launch_configurations()
cells = {(c.kernel, str(c.dtype), c.block.block_d) for c in full}
missing = []
for kernel, dtype, block_d in sorted(cells):
    mine = [dict(c.flags) for c in chosen if (c.kernel, str(c.dtype), c.block.block_d) == (kernel, dtype, block_d)]
    if not mine:
        missing.append(f"{kernel} {dtype} D{block_d}: not compiled")
    for flag in KERNEL_FLAGS[kernel]:
        for value in (False, True):
            if not any(f[flag] == value for f in mine):
                missing.append(f"{kernel} {dtype} D{block_d}: {flag}={value}")
for kernel, flags in KERNEL_FLAGS.items():
    for dtype in sorted({c[1] for c in cells}):
        mine = [dict(c.flags) for c in chosen if c.kernel == kernel and str(c.dtype) == dtype]
        for a, b in itertools.combinations(flags, 2):
            for va, vb in itertools.product((False, True), repeat=2):
                if not any(f[a] == va and f[b] == vb for f in mine):
                    missing.append(f"{kernel} {dtype}: {a}={va} with {b}={vb}")
switched = lambda configs: len([c for c in configs if KERNEL_FLAGS[c.kernel]])  # noqa: E731
print(json.dumps(dict(missing=missing, chosen=switched(chosen), full=switched(full))))
"""


def test_the_compiled_subset_covers_every_switch():
    """compile_table compiles, for every kernel x dtype x head-dim tile, each switch on and off,
    and within each kernel and dtype every pair of switches in all four combinations, in far
    fewer compiles than the full product (counted over the kernels with switches: one without
    has nothing to cover and is compiled whole)."""
    run = subprocess.run([sys.executable, "-c", COVERING], env=dict(os.environ, TRITON_INTERPRET="0"),
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["missing"] == []
    assert result["chosen"] * 4 <= result["full"], result


# Compiled from nothing on every run, whatever the caches hold: per kernel, the most common GPU
# case (fp16, D = 64, every flag on) for sm_80, the largest fp32 tile row (D = 128) for sm_90,
# and for the band kernels fp16 D = 64 with every flag on but DILATED (the interleaved dropout
# draws of consecutive keys) for sm_90, so CI itself proves the compiler still accepts each.
COLD_SAMPLE = """
import json, tempfile
import torch
import longformer_tools.gpu.compile_table as t
from longformer_kernels.triton_attention import launch_configurations
configs = launch_configurations()
picks = []
for kernel in sorted({c.kernel for c in configs}):
    for dtype, block_d, cap, undilated in ((torch.float16, 64, 80, False), (torch.float32, 128, 90, False),
                                           (torch.float16, 64, 90, True)):
        flags = [c for c in configs if c.kernel == kernel][0].flags
        if undilated and "DILATED" not in dict(flags):
            continue
        index = next(i for i, c in enumerate(configs) if c.kernel == kernel and c.dtype == dtype
                     and c.block.block_d == block_d
                     and all(v != (undilated and k == "DILATED") for k, v in c.flags))
        picks.append((index, cap))
with tempfile.TemporaryDirectory() as cache:
    t._worker_init(cache)
    print(json.dumps([t.compile_one(i, cap, full=True) for i, cap in picks]))
"""


def test_a_sample_compiles_from_nothing():
    env = dict(os.environ, TRITON_INTERPRET="0")
    run = subprocess.run([sys.executable, "-c", COLD_SAMPLE],
                         env=env, capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr[-5000:]
    records = json.loads(run.stdout.strip().splitlines()[-1])
    # every kernel x 2, and the 3 band kernels undilated
    assert len(records) == len(kernels.KERNEL_FLAGS) * 2 + 3
    for r in records:
        assert r["error"] is None, f"sm_{r['cap']} {r['name']}: {r['error']}"
        # shared memory read from the compiled metadata; only the chunk sum (no dot, no
        # reduction across threads) needs none
        assert r["shared"] <= r["limit"], r
        assert r["shared"] > 0 or r["kernel"] == "sum_rows_kernel", r
        print(f"sm_{r['cap']} {r['name']}: {r['shared']} B shared, {r['spill_stores']} B spilled, {r['seconds']} s")
