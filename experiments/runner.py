"""What every experiment shares: fairseq commands as subprocesses with their output in a log
file, the numbers read back from those logs, seed statistics, markdown tables and verdicts.

Seed statistics, one convention for every table: a row's **mean over seeds ± spread**, where the
spread is **half the range**, (max - min) / 2, reported with min and max. Why not the sample
standard deviation: the experiments here run one to three seeds, where a standard deviation is
a poor estimate of anything (two seeds give one degree of freedom), while half the range states
a plain fact about the seeds that were run: every seed lies within mean ± spread (with two
seeds, at exactly its ends). It also matches what the verdicts ask: whether every seed of one
row beats every seed of another (``beats_every_seed``), i.e. whether the rows' ranges are apart.
"""
import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

# The experiments run from a checkout (editable install): they read the bundled corpus and start
# the shell launchers of recipes/, which no installed copy of the package carries.
REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "fairseq_longformer"  # the --user-dir of every run of the plugin's models
KJV = REPO / "data" / "kjv"  # the bundled corpus every experiment is built from

TRAIN_DONE = "done training in"  # fairseq_cli.train logs it after the last checkpoint is saved
LOG_TAIL_LINES = 30  # of a failed command's log, in its error


# ----------------------------------------------------------------------------------------------
# commands


class Run:
    """One command started in the background, stdout and stderr together in ``log``.

    threads: OMP/MKL threads of the child (None: inherit). On a shared two-core machine, two
    OpenMP threads per fairseq process were 15x slower than one (measured), so the experiments
    pass 1 unless told otherwise.

    done_marker: text the command prints once its work is saved. fairseq-train sometimes dies
    at interpreter exit after finishing ("terminate called without an active exception", a C++
    thread still alive at teardown; seen here): with the marker in the log that is no failure.
    """

    def __init__(self, name: str, cmd: Sequence[str], log: Path, threads: Optional[int] = None,
                 env: Optional[Dict[str, str]] = None, done_marker: Optional[str] = None,
                 cwd: Optional[Path] = REPO):
        self.name, self.cmd, self.log, self.done_marker = name, list(cmd), Path(log), done_marker
        child = dict(os.environ if env is None else env)
        if threads is not None:
            child["OMP_NUM_THREADS"] = child["MKL_NUM_THREADS"] = str(threads)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.log, "w")
        self.process = subprocess.Popen(self.cmd, stdout=self._handle, stderr=subprocess.STDOUT, env=child,
                                        cwd=None if cwd is None else str(cwd))

    def finished(self) -> bool:
        return self.process.poll() is not None

    def wait(self) -> str:
        """Wait for the command; its log's text. Raises RuntimeError with the log's tail when it
        failed (a nonzero exit status without the done marker)."""
        rc = self.process.wait()
        self._handle.close()
        text = self.log.read_text(errors="replace")
        if rc != 0 and not (self.done_marker and self.done_marker in text):
            tail = "".join(text.splitlines(True)[-LOG_TAIL_LINES:])
            raise RuntimeError(f"{self.name} failed (exit {rc}): {shlex.join(self.cmd)}\n--- {self.log} ---\n{tail}")
        return text

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._handle.close()


def run(name: str, cmd: Sequence[str], log: Path, **kwargs) -> str:
    """Run a command to its end (see ``Run``); its log's text."""
    return Run(name, cmd, log, **kwargs).wait()


def command_line(module: str, argv: Sequence[str]) -> str:
    """The shell command that runs ``python -m module`` with ``argv``: each result table names it."""
    return shlex.join(["python", "-m", module, *argv])


# ----------------------------------------------------------------------------------------------
# logs


EVAL_LM_BITS = re.compile(r"Loss \(base 2\): ([0-9.]+|nan|inf)")


def eval_lm_bits(log: str) -> float:
    """The last "Loss (base 2)" fairseq-eval-lm printed: bits per token (per character for a
    character dictionary)."""
    found = EVAL_LM_BITS.findall(log)
    if not found:
        raise RuntimeError("no 'Loss (base 2)' in the fairseq-eval-lm log:\n" + log[-3000:])
    return float(found[-1])


def last_valid(log: str, metric: str) -> float:
    """``metric`` of the last "valid on 'valid' subset" line of a fairseq-train log."""
    lines = [line for line in log.splitlines() if "valid on 'valid' subset" in line]
    found = re.search(rf"\| {re.escape(metric)} ([\d.]+)", lines[-1]) if lines else None
    if found is None:
        raise RuntimeError(f"no validation {metric} in the training log:\n" + log[-3000:])
    return float(found.group(1))


# ----------------------------------------------------------------------------------------------
# seeds and verdicts


def summarize(values: Sequence[float]) -> Dict[str, float]:
    """Mean and spread (half the range, see the module's docstring), min and max of one row's
    values over seeds."""
    values = list(values)
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"seed values {values}: need at least one, all finite")
    return {"mean": sum(values) / len(values), "spread": (max(values) - min(values)) / 2,
            "min": min(values), "max": max(values)}


def beats_every_seed(better: Dict, worse: Dict, lower_is_better: bool) -> bool:
    """Every seed of ``better`` strictly better than every seed of ``worse`` (summaries from
    ``summarize``): their ranges are apart, on the right side."""
    return better["max"] < worse["min"] if lower_is_better else better["min"] > worse["max"]


def compare(better: Dict, worse: Dict, seeds: int, lower_is_better: bool) -> Dict:
    """Does ``better`` beat ``worse`` as the paper says? holds: on the mean; gap: by how much
    (positive when it holds); resolved: whether the two rows' seed ranges are apart (in either
    direction), None with one seed (nothing to tell a gap from seed noise with)."""
    gap = worse["mean"] - better["mean"] if lower_is_better else better["mean"] - worse["mean"]
    apart = beats_every_seed(better, worse, lower_is_better) or beats_every_seed(worse, better, lower_is_better)
    return {"holds": gap > 0, "gap": gap, "resolved": apart if seeds > 1 else None}


def ordering_verdict(checks: Dict[str, Dict], claim: str) -> str:
    """One sentence on checks from ``compare``. The paper's ``claim`` holds here when every gap has
    the paper's sign beyond the seed spread; it does NOT hold when a gap has the other sign beyond
    it; otherwise it is undetermined: a gap inside the seed spread, of either sign, is one that
    seed noise could flip, so it neither confirms nor contradicts the paper."""
    one_seed = any(c["resolved"] is None for c in checks.values())
    against = [name for name, c in checks.items() if c["resolved"] and not c["holds"]]
    unresolved = [name for name, c in checks.items() if not c["resolved"]]
    if not one_seed and not against and not unresolved:
        return f"The paper's ordering holds at this scale ({claim}); every gap exceeds the seed spread."
    on_means = ", ".join(f"{name} ({'with' if checks[name]['holds'] else 'against'} the paper on the means)"
                         for name in unresolved)
    if one_seed:
        return ("The paper's ordering is undetermined at this scale: one seed only, so no spread to tell the "
                f"gaps from seed noise: {on_means}.")
    if against:
        head = ("The paper's ordering does NOT hold at this scale: not " + ", not ".join(against)
                + " (beyond the seed spread)")
    else:
        head = "The paper's ordering is undetermined at this scale"
    return head + (f"; within the seed spread (undetermined): {on_means}" if unresolved else "") + "."


# ----------------------------------------------------------------------------------------------
# tables


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> List[str]:
    """The lines of a markdown table; ``align`` has one letter per column, "l" or "r"."""
    if len(align) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"a table of {len(header)} columns, align {align!r}, rows of {[len(r) for r in rows]}")
    lines = ["| " + " | ".join(header) + " |", "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def regenerate_note(module: str, argv: Sequence[str]) -> str:
    """The line under every result table naming the command that regenerates it."""
    return f"Regenerate: `{command_line(module, argv)}` (from the repository root)."


# ---- the needle ablations (global attention, WikiHop in small): one command shape


def needle_ablation_parser(package, rows, *, updates: int, dim: int, window: int, long: int, doc_words: int,
                           needles: int, train_examples: int, valid_examples: int,
                           vocab: int) -> argparse.ArgumentParser:
    """The parser of ``python -m <package>`` (described by its docstring), with the flags every
    needle ablation shares (rows x seeds of a small model trained from scratch on KJV documents with
    needle sentences) at the calling one's defaults; --out defaults to work/<package's last name>."""
    p = argparse.ArgumentParser(prog=f"python -m {package.__name__}", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    out = REPO / "work" / package.__name__.rsplit(".", 1)[-1]
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--kjv", type=Path, default=KJV)
    p.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds")
    p.add_argument("--rows", default=",".join(rows), help="comma-separated rows to run: " + ", ".join(rows))
    p.add_argument("--updates", type=int, default=updates)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=dim)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--window", type=int, default=window, help="one-sided attention window of the long models")
    p.add_argument("--long", type=int, default=long, help="tokens per model input (every input must fit)")
    p.add_argument("--doc-words", type=int, default=doc_words, help="words around the needles per document, at most")
    p.add_argument("--min-word", type=int, help="first word a needle may start at (default: the receptive "
                                                "field, layers x window, beyond the global tokens' local reach)")
    p.add_argument("--needles", type=int, default=needles, help="sentences naming the answer per document")
    p.add_argument("--train-examples", type=int, default=train_examples)
    p.add_argument("--valid-examples", type=int, default=valid_examples)
    p.add_argument("--vocab", type=int, default=vocab, help="sentencepiece pieces")
    p.add_argument("--seed", type=int, default=1, help="seed of the data (split and examples)")
    return p


def check_needle_ablation_arguments(p, a, rows, receptive_field: int, reach: str) -> None:
    """Split --seeds and --rows; --min-word defaults to ``receptive_field`` and may not be inside it
    (``reach`` names whose reach it is, for the error)."""
    a.seeds = [s for s in a.seeds.split(",") if s]
    a.rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    unknown = [r for r in a.rows if r not in rows]
    if unknown or not a.rows or not a.seeds:
        p.error(f"--rows from {list(rows)} (got {unknown or 'none'}), --seeds not empty")
    a.min_word = receptive_field if a.min_word is None else a.min_word
    if a.min_word < receptive_field:
        p.error(f"--min-word {a.min_word} is inside {reach} ({receptive_field} tokens): the ablation would not "
                "test global attention")


def longest_input(data: Path) -> int:
    """The most tokens of any example longformer-prepare-task wrote into ``data`` (its stats.json)."""
    splits = json.loads((data / "stats.json").read_text())["splits"]
    return max(split["tokens"]["max"] for split in splits.values())


def train_rows(a, train, label_width: int) -> Dict[str, Dict[str, dict]]:
    """row -> seed -> ``train(a, row, seed)``'s result (with "accuracy" and "seconds"), each printed
    as it finishes."""
    results: Dict[str, Dict[str, dict]] = {}
    for row in a.rows:
        results[row] = {}
        for seed in a.seeds:
            result = results[row][seed] = train(a, row, int(seed))
            print(f"{row:{label_width}s} seed {seed}: accuracy {result['accuracy']:6.2f} "
                  f"({result['seconds']:.0f} s)", flush=True)
    return results


def build_and_train_rows(a, build, train, label_width: int, too_long: str):
    """The needle ablations' run: the data from ``build(a)`` (into --out), refused when an input
    is longer than --long (a cut input could lose its needle; ``too_long``: why, and the fix),
    then every row x seed (``train_rows``) with ``train(a, data, row, seed)``.
    Returns (the longest input's tokens, row -> seed -> result)."""
    a.out.mkdir(parents=True, exist_ok=True)
    data = build(a)
    longest = longest_input(data)
    if longest > a.long:
        raise SystemExit(f"the longest input has {longest} tokens, more than --long {a.long}: {too_long}")
    return longest, train_rows(a, lambda a, row, seed: train(a, data, row, seed), label_width)


def summarize_rows(results: Dict[str, Dict[str, dict]]) -> Dict[str, dict]:
    """Per row of ``train_rows``' results: accuracies by seed, and mean, spread, min, max over
    them (``summarize``), and the row's training seconds."""
    return {row: {"seeds": {s: r["accuracy"] for s, r in by_seed.items()},
                  **summarize([r["accuracy"] for r in by_seed.values()]),
                  "seconds": round(sum(r["seconds"] for r in by_seed.values()), 1)}
            for row, by_seed in results.items()}


def needle_ablation_main(argv, parse_args, build, train, label_width: int, too_long: str,
                         report: Callable[..., int]) -> int:
    """The main of a needle ablation: its flags (``argv``; None: the command line's) parsed by
    ``parse_args``, the rows built and trained (``build_and_train_rows``) and summarized
    (``summarize_rows``), then ``report(a, argv, longest_tokens, table, seconds)``: its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    started = time.time()
    longest, results = build_and_train_rows(a, build, train, label_width, too_long)
    return report(a, argv, longest, summarize_rows(results), round(time.time() - started))


def settings(a) -> dict:
    """The parsed arguments as a record stores them (paths as text)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
