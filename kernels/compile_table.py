"""Compile every Triton kernel of longformer_kernels for real GPUs, on a CPU, and tabulate it.

Triton compiles ahead of time without a GPU: ``triton.compile(ASTSource(...), target=GPUTarget(
"cuda", cap, 32))`` runs the whole pipeline down to PTX and a cubin (ptxas ships with Triton).
This script does that for every configuration the launchers can choose
(``triton_tiles.launch_configurations()``: kernel x dtype x BLOCK_D x tl.constexpr flags,
with the tiles ``block_config`` picks for a GPU) and every target capability, and records each
kernel's shared memory (``metadata.shared``, against the target's per-block limit), registers
and spilled bytes (from ptxas -v). ``tests/kernels/test_triton_compile.py`` runs it and fails
on a compile error or a shared-memory overflow.

    python -m longformer_kernels.compile_table                  # markdown table, one row per tile set
    python -m longformer_kernels.compile_table --detail         # one row per configuration
    python -m longformer_kernels.compile_table --json out.json  # the records, for tests
    python -m longformer_kernels.compile_table --markdown docs/results/triton_compile.md

Results are cached, keyed by Triton's version, the source of every @triton.jit function of the
device module (``triton_device.py``) and its tl.constexpr globals (``_source_hash``), the
configuration and the target: in ``--cache`` (default ~/.cache/longformer_kernels/
triton_compile.json) and, for the sources as committed, in
tests/kernels/triton_compile_results.json (``--write-seed``). A change to device code compiles
everything again (tens of minutes on 2 cores); a change to the tiles (``triton_tiles.py``),
only the configurations it changes. The kernel modules must be imported without
TRITON_INTERPRET (the interpreter replaces the jit functions), so this always runs as its own
process.
"""
import argparse
import concurrent.futures
import contextlib
import hashlib
import io
import itertools
import json
import multiprocessing
import os
import re
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # before triton and the kernels are imported
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning

CAPABILITIES = (80, 86, 89, 90)
# Shared memory one block may use (the opt-in maximum), per compute capability (CUDA C
# Programming Guide, "Technical Specifications per Compute Capability").
SHARED_LIMIT = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}
DEFAULT_CACHE = Path.home() / ".cache" / "longformer_kernels" / "triton_compile.json"
# Results of the current kernel sources, kept in the repository (--write-seed refreshes them),
# so that a checkout whose device code is unchanged need not compile again to pass the test.
# (A checkout's file; an installed wheel has none and compiles into --cache.)
SEED_CACHE = Path(__file__).resolve().parent.parent / "tests" / "kernels" / "triton_compile_results.json"
TYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
# Pointer arguments of the kernels: in the input dtype, or fixed.
DATA = set("Q K V O DO DQ DK DV QG KG VG DQG BIAS DBIAS OUT".split())
FIXED = {"LSE": "*fp32", "DELTA": "*fp32", "KIND": "*i8", "GIDX": "*i64", "GCOUNT": "*i64",
         "DIL": "*i32", "qk_scale": "fp32", "sm_scale": "fp32", "keep_scale": "fp32", "scale": "fp32",
         "PM": "*fp32", "PL": "*fp32", "PACC": "*fp32", "PDQ": "*fp32", "PDK": "*fp32", "PDV": "*fp32",
         "PART": "*fp32"}
STRIDE = re.compile(r"^[sgo]_[bhn]$")  # stride arguments


def _kernels():
    from longformer_kernels import triton_attention

    return triton_attention


def _device():
    """The module of the @triton.jit functions and their tl.constexpr globals (what is hashed)."""
    from longformer_kernels import triton_device

    return triton_device


def _signature(fn, dtype: str):
    """Argument types as a launch from torch tensors gives them, and the attributes Triton's
    launcher infers for 16-byte aligned pointers and strides divisible by 16 (the usual case:
    torch allocations are aligned, D = 64 or 128)."""
    from triton.backends.nvidia.compiler import CUDABackend

    signature, attrs = {}, {}
    for index, param in enumerate(fn.params):
        name = param.name
        if param.is_constexpr:
            signature[name] = "constexpr"
            continue
        signature[name] = ("*" + TYPE[dtype]) if name in DATA else FIXED.get(name, "i32")
        if signature[name].startswith("*") or STRIDE.match(name):
            attrs[(index,)] = CUDABackend.parse_attr("D")  # tt.divisibility = 16
    return signature, attrs


def _source_hash() -> str:
    """Hash of what the kernels are compiled from: Triton's version, the source of every
    @triton.jit function of the device module (``triton_device.py``) and the values of its
    tl.constexpr globals. Unlike Triton's own cache key it ignores line numbers, so editing
    host code or docstrings keeps the cache; any change to device code recompiles every kernel."""
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    module = vars(_device())
    parts = [triton.__version__]
    parts += [f"{name}:{obj.src}" for name, obj in sorted(module.items()) if isinstance(obj, JITFunction)]
    parts += [f"{name}={obj.value!r}" for name, obj in sorted(module.items()) if isinstance(obj, tl.constexpr)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _complementary_cover(count: int) -> list:
    """Pairs (setting, its complement) of ``count`` boolean switches such that every pair of
    switches takes all four value combinations in some setting (a pairwise covering array
    closed under complement; greedy, deterministic). 1 switch: 1 pair; 2-3: 2-4; 4: 4 of 8."""
    settings = list(itertools.product((False, True), repeat=count))
    wanted = {(a, b, va, vb) for a, b in itertools.combinations(range(count), 2)
              for va in (False, True) for vb in (False, True)}

    def covers(setting):
        return {(a, b, setting[a], setting[b]) for a, b in itertools.combinations(range(count), 2)}

    pairs = [(settings[0], settings[-1])]  # all off, all on
    wanted -= covers(settings[0]) | covers(settings[-1])
    while wanted:
        best = max(settings, key=lambda st: len(wanted & (covers(st) | covers(tuple(not v for v in st)))))
        complement = tuple(not v for v in best)
        pairs.append((best, complement))
        wanted -= covers(best) | covers(complement)
    return pairs


def compiled_configurations(full: bool = False) -> list:
    """The launch configurations this script compiles. ``full``: all of them (kernel x dtype x
    BLOCK_D x every combination of the kernel's switches; 1,920 compiles before the dilation
    switch, 3,360 after, hours on 2 cores). Otherwise a covering subset: for each kernel, dtype
    and BLOCK_D one pair of complementary switch settings (so every switch is compiled on and
    off with every tile set and dtype), the pairs of ``_complementary_cover`` taken in turn
    across the BLOCK_Ds (so within each kernel and dtype every pair of switches meets in all
    four combinations). Each switch is a tl.constexpr that includes or removes a block of code;
    what can fail to compile (shared memory, registers, a layout conversion) lives in the tile
    set and dtype, which every kernel gets in full."""
    configs = _kernels().launch_configurations()
    if full:
        return list(configs)
    chosen, cell_index = [], {}
    for config in configs:
        names = tuple(name for name, _ in config.flags)
        cell = (config.kernel, config.dtype, config.block.block_d)
        index = cell_index.setdefault(cell, sum(1 for c in cell_index if c[0] == config.kernel))
        cover = _complementary_cover(len(names))
        setting = tuple(value for _, value in config.flags)
        if setting in cover[index % len(cover)]:
            chosen.append(config)
    return chosen


def _key(config, cap: int, source: str) -> str:
    return hashlib.sha256(f"{source}|{config.name}|{cap}".encode()).hexdigest()[:32]


def _ptxas_numbers(log: str):
    regs = re.search(r"Used (\d+) registers", log)
    stores = re.search(r"(\d+) bytes spill stores", log)
    loads = re.search(r"(\d+) bytes spill loads", log)
    return (int(regs.group(1)) if regs else None, int(stores.group(1)) if stores else None,
            int(loads.group(1)) if loads else None)


def compile_one(index: int, cap: int, full: bool = False) -> dict:
    """Compile configuration ``index`` of compiled_configurations(full) for sm_<cap>; a record."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget

    kernels = _kernels()
    config = compiled_configurations(full)[index]
    fn = getattr(kernels, config.kernel)
    dtype = str(config.dtype).replace("torch.", "")
    record = dict(name=config.name, kernel=config.kernel.strip("_"), dtype=dtype,
                  block_d=config.block.block_d,
                  tiles=f"{config.block.block_m}x{config.block.block_n}",
                  warps=config.block.num_warps, stages=config.block.num_stages,
                  flags=[k.lower() for k, v in config.flags if v], cap=cap,
                  limit=SHARED_LIMIT[cap], shared=None, regs=None, spill_stores=None,
                  spill_loads=None, error=None, seconds=None, triton=triton.__version__)
    signature, attrs = _signature(fn, dtype)
    start = time.time()
    knobs.nvidia.dump_ptxas_log = True  # Triton prints ptxas -v output: captured below
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            compiled = triton.compile(
                triton.compiler.ASTSource(fn, signature, config.constexprs, attrs),
                target=GPUTarget("cuda", cap, 32),
                options=dict(num_warps=config.block.num_warps, num_stages=config.block.num_stages))
        record["shared"] = compiled.metadata.shared
        record["regs"], record["spill_stores"], record["spill_loads"] = _ptxas_numbers(log.getvalue())
        if record["spill_stores"] is None:
            record["error"] = "no ptxas -v output captured (was the cubin taken from a cache?)"
    except Exception as error:  # noqa: BLE001  (every failure is a result to report)
        record["error"] = f"{type(error).__name__}: {error}"[-2000:]
    record["seconds"] = round(time.time() - start, 2)
    return record


def _worker_init(cache_dir: str) -> None:
    # A private Triton cache per run: a cubin from Triton's cache would come without ptxas -v.
    from triton import knobs

    knobs.cache.dir = cache_dir


def compile_all(caps=CAPABILITIES, jobs: int = 2, cache_path=DEFAULT_CACHE, kernels=None,
                progress=None, seed_path=None, full: bool = False) -> list:
    """Records for every compiled configuration (``compiled_configurations``) and capability
    (from the caches where valid); written to ``cache_path`` (and ``seed_path``): the records
    of the current sources only."""
    import tempfile

    configs = compiled_configurations(full)
    source = _source_hash()
    cache = {}
    for path in (SEED_CACHE, cache_path):  # the repository's results, then the user's
        if path and Path(path).exists():
            cache.update(json.loads(Path(path).read_text()))
    todo, records = [], {}
    for index, config in enumerate(configs):
        if kernels and config.kernel.strip("_") not in kernels:
            continue
        for cap in caps:
            key = _key(config, cap, source)
            if key in cache and not cache[key]["error"]:
                records[key] = cache[key]
            else:
                todo.append((key, index, cap))
    with tempfile.TemporaryDirectory() as triton_cache:
        context = multiprocessing.get_context("spawn")  # no fork after torch's threads start
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init,
                                                    initargs=(triton_cache,)) as pool:
            futures = {pool.submit(compile_one, index, cap, full): key for key, index, cap in todo}
            for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                records[futures[future]] = future.result()
                if progress:
                    progress(done, len(todo), records[futures[future]])
    cache.update(records)
    current = {_key(config, cap, source) for config in configs for cap in CAPABILITIES}
    for path, entries in ((cache_path, cache),
                          (seed_path, {k: v for k, v in cache.items() if k in current})):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(entries, indent=0, sort_keys=True))
    return sorted(records.values(), key=lambda r: (r["kernel"], r["dtype"], r["block_d"],
                                                   r["flags"], r["cap"]))


def problems(records) -> list:
    """What the test fails on: compile errors and shared memory beyond the target's limit."""
    bad = []
    for r in records:
        if r["error"]:
            bad.append(f"sm_{r['cap']} {r['name']}: compile failed: {r['error']}")
        elif r["shared"] > r["limit"]:
            bad.append(f"sm_{r['cap']} {r['name']}: {r['shared']} bytes of shared memory > "
                       f"{r['limit']} allowed per block")
    return bad


def markdown(records, caps=CAPABILITIES, detail: bool = False) -> str:
    """One row per (kernel, dtype, BLOCK_D) with the largest shared memory (KiB) and spilled
    bytes (stores) over its flag variants, per target; ``detail``: one row per configuration."""
    rows = {}
    for r in records:
        head = (r["kernel"], r["dtype"], r["block_d"], r["tiles"], r["warps"], r["stages"])
        if detail:
            head += (" ".join(r["flags"]) or "-",)
        cell = rows.setdefault(head, {}).setdefault(r["cap"], [0, 0, 0, ""])
        if r["error"]:
            cell[3] = "FAIL"
            continue
        cell[0] = max(cell[0], r["shared"])
        cell[1] = max(cell[1], r["spill_stores"] or 0)
        cell[2] = max(cell[2], r["regs"] or 0)
    columns = ["kernel", "dtype", "D", "tiles", "warps", "stages"] + (["flags"] if detail else [])
    columns += [f"sm_{c} shared KiB / spill B" for c in caps]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for head, cells in rows.items():
        values = [str(v) for v in head]
        for cap in caps:
            shared, spills, regs, fail = cells.get(cap, [0, 0, 0, "-"])
            values.append(fail or f"{shared / 1024:.1f} / {spills}")
        lines.append("| " + " | ".join(values) + " |")
    limits = ", ".join(f"sm_{c} {SHARED_LIMIT[c] // 1024} KiB" for c in caps)
    lines.append("")
    lines.append(f"Shared memory per block allowed: {limits}. Spill B: bytes of spill stores per "
                 "thread reported by ptxas -v (the largest over the causal / dropout / "
                 "band-bias / global-keys variants of the row); registers are capped at 255.")
    return "\n".join(lines)


def recorded_tritons(records) -> str:
    """The Triton versions the records were compiled with, as they recorded them (the page shows
    what compiled, not what is installed where it is rendered)."""
    versions = sorted({r["triton"] for r in records if r.get("triton")})
    missing = sum(1 for r in records if not r.get("triton"))
    text = "Triton " + ", ".join(versions) if versions else ""
    if missing:
        text += ("; " if text else "") + f"{missing} records compiled before the version was recorded"
    return text


def page(table: str, command: str, note: str = "", records=()) -> str:
    """The results page around ``markdown``'s table, naming the command that wrote it and the
    Triton version each record was compiled with."""
    return ("# Triton kernels compiled for GPUs: shared memory and register spills\n\n"
            f"Generated by `{command}`{note} ({recorded_tritons(records)}); shared memory in KiB /\n"
            "register spill stores in bytes per thread, worst over the flag variants of a row.\n\n"
            + table + "\n")


# the command that writes docs/results/triton_compile.md: the seed as the only cache, so only
# configurations it lacks compile (after a device-code change, all of them)
SEED_PAGE_COMMAND = ("python -m longformer_kernels.compile_table --write-seed --cache '' "
                     "--markdown docs/results/triton_compile.md")


def seed_page() -> str:
    """docs/results/triton_compile.md from the repository's seed alone (no compiler, no GPU): the
    seed holds exactly the records of the current sources (``compile_all`` writes it so)."""
    records = sorted(json.loads(SEED_CACHE.read_text()).values(),
                     key=lambda r: (r["kernel"], r["dtype"], r["block_d"], r["flags"], r["cap"]))
    return page(markdown(records), SEED_PAGE_COMMAND,
                " (the repository's seed as the cache: only configurations not in it compile; after a "
                "device-code change, all of them)", records)


def main(argv=None) -> int:
    global SEED_CACHE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--caps", default=",".join(map(str, CAPABILITIES)))
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="results cache ('' for none)")
    parser.add_argument("--no-seed", action="store_true",
                        help="ignore the repository's results (compile everything not in --cache)")
    parser.add_argument("--write-seed", action="store_true",
                        help="write the results to tests/kernels/triton_compile_results.json")
    parser.add_argument("--kernels", default="", help="comma-separated subset, e.g. band_fwd_kernel")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--detail", action="store_true", help="one table row per configuration")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--markdown", help="also write the table as a page (docs/results/...)")
    parser.add_argument("--full", action="store_true",
                        help="every launch configuration, not the covering subset (hours on 2 cores)")
    args = parser.parse_args(argv)
    caps = tuple(int(c) for c in args.caps.split(","))
    start = time.time()

    def progress(done, total, r):
        if not args.quiet:
            status = r["error"][:200] if r["error"] else (
                f"shared {r['shared']} regs {r['regs']} spills {r['spill_stores']}")
            print(f"[{done}/{total} {time.time() - start:.0f}s] sm_{r['cap']} {r['name']}: {status}",
                  file=sys.stderr, flush=True)

    seed_out = SEED_CACHE if args.write_seed else None
    if args.no_seed:
        SEED_CACHE = None
    records = compile_all(caps, args.jobs, args.cache or None,
                          [k for k in args.kernels.split(",") if k] or None, progress, seed_out, args.full)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    table = markdown(records, caps, args.detail)
    print(table)
    if args.markdown:
        command = "python -m longformer_kernels.compile_table " + " ".join(argv or sys.argv[1:])
        Path(args.markdown).write_text(page(table, command.strip(), records=records))
    bad = problems(records)
    for line in bad:
        print("PROBLEM:", line, file=sys.stderr)
    print(f"{len(records)} compiles checked in {time.time() - start:.0f} s", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
