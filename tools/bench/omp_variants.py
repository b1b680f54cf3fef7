"""What OpenMP's wait policy costs and saves: ``longformer-bench train-steps --omp-variants``.

The project sets no wait policy: its processes run under libgomp's default (a long spin before
idle threads sleep) unless the user exports one (OMP_WAIT_POLICY, GOMP_SPINCOUNT), which passes
through untouched. This times what a policy a user may choose costs a quiet machine and saves a
busy one. libgomp reads its environment once, when it is loaded, so each variant runs in processes
of its own: every round starts one child per variant
(``python -m longformer_tools.bench.omp_variants``), in an order that turns by one each round, and
each child times the same rows as ``train-steps`` does (``train_steps.run``) at the parent's thread count.
Per row and variant the page reports the median tokens/s over the rounds with its range, and the
ratio to libgomp-default taken per round (the two were timed side by side) with its median and
range. ``spinN`` names a variant of GOMP_SPINCOUNT=N, for choosing the spin. With ``--busy N``
each child times its rows again beside N spin processes (``competing_load``) at the same thread
count: a load that arrives after the thread count was chosen, which is where the spin decides; the
page then adds each variant's slowdown (quiet tokens/s / busy tokens/s of one child, median and
range over the rounds).

Shapes of the record: ``rounds[r]["runs"][variant]`` is a child's ``train_steps.run`` report
(``rows``: one summary per row; with --busy also ``busy_rows``) plus the OpenMP variables it ran
under (``omp_environment``).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Sequence

from longformer_common import quiet
from longformer_common.errors import UserInputError
from longformer_common.provenance import provenance_line
from longformer_common.staleness import CPU_MODEL_CODE, stale_banner

from .competing_load import competing_load

# the variables that choose a wait policy: none reaches a child but its variant's (KMP_: the
# LLVM/Intel runtime's, should a torch build link it)
WAIT_POLICY_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
# variant -> the OpenMP variables its children run under (every other wait-policy variable unset)
VARIANTS: Dict[str, Dict[str, str]] = {
    # libgomp's own default, named explicitly: what the project's processes run under
    "libgomp-default": {"GOMP_SPINCOUNT": "300000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},  # never spin
}
SPIN = re.compile(r"spin([0-9]{1,9})$")  # spinN: GOMP_SPINCOUNT=N
BASELINE = "libgomp-default"
ISSUE_TARGET = 0.05  # issue 51: what a wait policy may cost the main job's quiet speed
# what the page's numbers depend on: the model code (each variant's variables are in the record)
MEASURED_CODE = CPU_MODEL_CODE


def variables(name: str) -> Dict[str, str]:
    """The OpenMP variables of variant ``name``: a named one of ``VARIANTS`` or ``spinN``."""
    spin = SPIN.match(name)
    return {"GOMP_SPINCOUNT": str(int(spin.group(1)))} if spin else VARIANTS[name]


def parse_variants(text: str) -> List[str]:
    """The variants of ``--omp-variants`` (comma-separated); a UserInputError (one line) for an
    unknown or repeated name, or when the baseline of the ratios is missing."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS and not SPIN.match(name)]
    if unknown or not names:
        raise UserInputError(f"--omp-variants: unknown {','.join(unknown) or '(none given)'}; "
                             f"choose from {','.join(VARIANTS)} or spinN (GOMP_SPINCOUNT=N)")
    if len(set(names)) != len(names):
        raise UserInputError(f"--omp-variants: {text!r} names a variant twice; name each once")
    if BASELINE not in names:
        raise UserInputError(f"--omp-variants: add {BASELINE} (the ratios are to it), e.g. "
                             f"--omp-variants {','.join(names)},{BASELINE}")
    return names


def variant_environment(name: str, environ=None) -> Dict[str, str]:
    """The environment of a child of variant ``name``: this one without any wait-policy variable
    (``WAIT_POLICY_VARIABLES``), plus the variant's."""
    environ = os.environ if environ is None else environ
    kept = {key: value for key, value in environ.items() if key not in WAIT_POLICY_VARIABLES}
    return {**kept, **variables(name)}


def _child_run(variant: str, spec: dict, timeout_s: float) -> dict:
    """One child of ``variant``: its ``train_steps.run`` report, or {"status": "error", "note"}."""
    with tempfile.TemporaryDirectory(prefix="omp-variant-") as folder:
        result = os.path.join(folder, "result.json")
        command = [sys.executable, "-m", __name__, json.dumps(spec), result]
        try:
            done = subprocess.run(command, env=variant_environment(variant), capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "error", "note": f"the child ran past {timeout_s:.0f} s"}
        if done.returncode != 0 or not os.path.exists(result):
            return {"status": "error", "note": f"the child exited {done.returncode}: {done.stderr[-300:]}"}
        with open(result) as handle:
            return json.load(handle)


def compare(variants: Sequence[str], rounds: int, spec: dict, progress: Callable[[str], None] = print) -> dict:
    """``rounds`` rounds of one child per variant, the order turning by one each round. ``spec``:
    rows, checkpointing, size, max_batch, repeats, time_cap, threads (of ``train_steps.run``)."""
    from .train_steps import format_row, time_bound

    # a child times its rows once quiet and, with --busy, once more beside spinners of the same bound
    timeout_s = time_bound(spec["time_cap"], spec["rows"], spec["checkpointing"]) * (2 if spec.get("busy") else 1)
    record = {"omp_variants": list(variants), "variant_environment": {v: variables(v) for v in variants},
              "omp_rounds": rounds, "settings": dict(spec), "rounds": []}
    for index in range(rounds):
        order = [variants[(index + k) % len(variants)] for k in range(len(variants))]
        runs = {}
        for variant in order:
            runs[variant] = run = _child_run(variant, spec, timeout_s)
            for row in run.get("rows", []):
                progress(f"round {index + 1} {variant:16} " + format_row(row))
            for row in run.get("busy_rows", []):
                progress(f"round {index + 1} {variant:16} busy " + format_row(row))
            if run.get("status") == "error":
                progress(f"round {index + 1} {variant:16} error: {run['note']}")
        record["rounds"].append({"order": order, "runs": runs})
    record["summary"] = summary(record)
    return record


def _tokens(run: dict, threads: int, rows: str = "rows") -> Dict[tuple, float]:
    """(row, checkpointing) -> tokens/s of one child's ``rows`` (or ``busy_rows``) measured ok, at
    ``threads`` threads."""
    if run.get("threads", threads) != threads:
        return {}
    return {(r["name"], r["checkpointing"]): r["tokens_per_s"] for r in run.get(rows, [])
            if r["status"] == "ok" and r["tokens_per_s"]}


def summary(record: dict) -> List[dict]:
    """Per (row, checkpointing, variant): tokens/s over the rounds (median, min, max) and the
    per-round ratio to the baseline's tokens/s of the same round (median, min, max; None without
    a round where both were measured); with busy rows also the slowdown per child (quiet tokens/s
    over its busy tokens/s; median, min, max, None without busy rows)."""
    entries, threads = [], record["settings"]["threads"]
    keys = sorted({key for r in record["rounds"] for run in r["runs"].values() for key in _tokens(run, threads)})
    for key in keys:
        for variant in record["omp_variants"]:
            tokens, ratios, slowdowns = [], [], []
            for one in record["rounds"]:
                mine = _tokens(one["runs"].get(variant, {}), threads)
                base = _tokens(one["runs"].get(BASELINE, {}), threads)
                busy = _tokens(one["runs"].get(variant, {}), threads, "busy_rows")
                if key in mine:
                    tokens.append(mine[key])
                    if key in base:
                        ratios.append(mine[key] / base[key])
                    if key in busy:
                        slowdowns.append(mine[key] / busy[key])
            if tokens:
                entries.append({"name": key[0], "checkpointing": key[1], "variant": variant, "rounds": len(tokens),
                                **_spread("tokens_per_s", tokens), **_spread("ratio", ratios),
                                **_spread("slowdown", slowdowns)})
    return entries


def _spread(prefix: str, values: List[float]) -> dict:
    if not values:
        return {f"{prefix}_median": None, f"{prefix}_min": None, f"{prefix}_max": None}
    return {f"{prefix}_median": statistics.median(values), f"{prefix}_min": min(values), f"{prefix}_max": max(values)}


def _cell(entry: dict, prefix: str, spec: str) -> str:
    if entry[f"{prefix}_median"] is None:
        return "-"
    return (f"{format(entry[prefix + '_median'], spec)} "
            f"({format(entry[prefix + '_min'], spec)}-{format(entry[prefix + '_max'], spec)})")


def format_summary(entries: List[dict]) -> List[str]:
    """The printed table: per row and variant, tokens/s, the ratio to the baseline and, measured
    busy, the slowdown."""
    lines = [f"{'row':18} {'ckpt':>4} {'variant':16} {'tokens/s median (min-max)':>28} "
             f"{'/ ' + BASELINE + ' (min-max)':>30} {'busy slowdown (min-max)':>26}"]
    for e in entries:
        lines.append(f"{e['name']:18} {'on' if e['checkpointing'] else 'off':>4} {e['variant']:16} "
                     f"{_cell(e, 'tokens_per_s', ',.0f'):>28} {_cell(e, 'ratio', '.3f'):>30} "
                     f"{_cell(e, 'slowdown', '.2f'):>26}")
    return lines


def _verdict(entries: List[dict]) -> List[str]:
    """Per row and variant other than the baseline (what the project runs under): its quiet
    tokens/s against the baseline's, beside issue 51's 5% (what a policy a user exports may cost)."""
    lines = []
    for e in entries:
        if e["variant"] == BASELINE or e["ratio_median"] is None:
            continue
        within = e["ratio_median"] >= 1 - ISSUE_TARGET
        lines.append(f"- {e['name']} (checkpointing {'on' if e['checkpointing'] else 'off'}), {e['variant']}: "
                     f"quiet steps run at {e['ratio_median']:.3f}x {BASELINE}'s tokens/s (median of the rounds' "
                     f"ratios): {'within' if within else 'NOT within'} the {ISSUE_TARGET:.0%} of issue 51 "
                     "for what a wait policy may cost a quiet machine.")
    return lines


def failures(record: dict) -> List[str]:
    """"round R variant: why" of each child that failed or ran at another thread count than
    asked, and of each row a child could not measure: all left out of ``summary``."""
    failed = []
    for index, one in enumerate(record["rounds"]):
        for variant, run in one["runs"].items():
            where = f"round {index + 1} {variant}"
            if run.get("status") == "error":
                failed.append(f"{where}: {run['note']}")
            failed += [f"{where} {r['name']}: {r['status']} {r['note']}".rstrip() for r in run.get("rows", [])
                       if r["status"] != "ok"]
            failed += [f"{where} {r['name']} busy: {r['status']} {r['note']}".rstrip()
                       for r in run.get("busy_rows", []) if r["status"] != "ok"]
            if run.get("threads", record["settings"]["threads"]) != record["settings"]["threads"]:
                failed.append(f"{where}: ran at {run['threads']} threads, not {record['settings']['threads']}")
    return failed


def page(record: dict, json_path: str) -> str:
    """The results page of a stored comparison, from its record alone."""
    env, settings = record.get("environment", {}), record["settings"]
    banners = [quiet.load_banner(env.get("load_average_at_start"), env.get("load_average_at_end")),
               stale_banner((record.get("provenance") or {}).get("commit"), MEASURED_CODE)]
    variables = ", ".join(f"{name} = {', '.join(f'{k}={v}' for k, v in values.items())}"
                          for name, values in record["variant_environment"].items())
    busy = settings.get("busy", 0)
    title = "quiet and busy" if busy else "quiet"
    lines = [f"# A training step's {title} tokens/s under OpenMP wait policies (CPU)", "",
             *[line for banner in banners if banner for line in (banner, "")],
             "Written by this command (it measures again; run it alone on a quiet machine):", "",
             "```bash", env.get("command", "longformer-bench train-steps --omp-variants ..."), "```", "",
             "and re-rendered from the stored JSON, measuring nothing, by "
             "`python -m longformer_tools.report.results_pages --write`. "
             f"Data: [{os.path.basename(json_path)}]({os.path.basename(json_path)}).", "",
             provenance_line(record.get("provenance")), "",
             f"Variants (each child process runs with only these wait-policy variables set): {variables}. "
             f"{record['omp_rounds']} round(s); in each, one fresh process per variant, the order turning by one "
             f"each round; each process times {settings['repeats']} training step(s) per row after two "
             f"warm-ups, at {settings['threads']} torch thread(s) in every variant "
             f"(policy: {env.get('thread_policy', 'not recorded')}). tokens/s of a round: from the median of "
             f"its steps; the ratio to {BASELINE}: per round, the two timed side by side.", ""]
    if busy:
        lines += [f"Busy: each process then times its rows again beside {busy} spin process(es) "
                  "(`bench/competing_load.py`) at the same thread count, a load that arrives after the "
                  "thread count was chosen; slowdown = its quiet tokens/s / its busy tokens/s (> 1: slower "
                  "busy), median (min-max) over the rounds.", ""]
    header = (f"| row | checkpointing | variant | tokens/s, median (min-max) over the rounds | "
              f"/ {BASELINE}, median (min-max) |")
    lines += [header + (" slowdown beside the busy process(es) |" if busy else ""),
              "|---|---|---|---:|---:|" + ("---:|" if busy else "")]
    for e in record["summary"]:
        lines.append(f"| {e['name']} | {'on' if e['checkpointing'] else 'off'} | {e['variant']} | "
                     f"{_cell(e, 'tokens_per_s', ',.0f')} | {_cell(e, 'ratio', '.3f')} |"
                     + (f" {_cell(e, 'slowdown', '.2f')} |" if busy else ""))
    lines += ["", *_verdict(record["summary"])]
    failed = failures(record)
    if failed:
        lines += ["", "Left out above: " + "; ".join(failed)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _child_main(spec_text: str, result_path: str) -> int:
    """A child: time ``spec``'s rows under this process's OpenMP environment; write the report."""
    import torch

    from .train_steps import run, time_bound

    spec = json.loads(spec_text)
    torch.set_num_threads(spec["threads"])
    def timed() -> dict:
        return run(spec["rows"], spec["checkpointing"], torch.device("cpu"), spec["size"], spec["max_batch"],
                   spec["repeats"], spec["time_cap"], progress=lambda line: None)

    report = timed()
    if spec.get("busy"):
        with competing_load(spec["busy"], time_bound(spec["time_cap"], spec["rows"], spec["checkpointing"])):
            report["busy_rows"] = timed()["rows"]
    report["omp_environment"] = {name: os.environ.get(name) for name in WAIT_POLICY_VARIABLES}
    report["threads"] = torch.get_num_threads()
    with open(result_path, "w") as handle:
        json.dump(report, handle)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(*sys.argv[1:]))
