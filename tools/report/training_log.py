"""fairseq-train's log (``--log-file``, formats ``simple`` or ``json``) -> per-update records.

A resumed run appends to the same file and repeats the updates after its checkpoint; the last
record of each update wins, so the curve is the one that produced the final checkpoint.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

_KIND = re.compile(r"\| (train_inner|valid) \|")
_PAIR_EQ = re.compile(r"(\w+)=([-+0-9.eE]+|inf|nan)")  # simple train_inner: key=value, ...
_PAIR_BAR = re.compile(r"\| (\w+) ([-+0-9.eE]+|inf|nan)(?= \||$)")  # simple valid: | key value |


@dataclass
class TrainingLog:
    train: Dict[int, Dict[str, float]] = field(default_factory=dict)  # num_updates -> stats
    valid: Dict[int, Dict[str, float]] = field(default_factory=dict)

    def series(self, kind: str, key: str) -> List[tuple]:
        """[(update, value)] sorted by update, for records that have ``key``."""
        records = self.train if kind == "train" else self.valid
        return [(u, r[key]) for u, r in sorted(records.items()) if key in r]


def _numbers(pairs) -> Dict[str, float]:
    out = {}
    for key, value in pairs:
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def parse_line(line: str):
    """-> (kind, stats) for a train_inner or valid line, else None."""
    match = _KIND.search(line)
    if not match:
        return None
    kind, rest = match.group(1), line[match.end():]
    if "{" in rest:
        try:
            stats = json.loads(rest[rest.index("{"):])
        except json.JSONDecodeError:
            return None
        stats = _numbers((k[len("valid_"):] if k.startswith("valid_") else k, v) for k, v in stats.items())
    elif kind == "train_inner":
        stats = _numbers(_PAIR_EQ.findall(rest))
    else:
        stats = _numbers(_PAIR_BAR.findall(rest))
    if "num_updates" not in stats:
        return None
    return kind, stats


def read_training_log(path: Path) -> TrainingLog:
    log = TrainingLog()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parsed = parse_line(line.rstrip("\n"))
            if parsed:
                kind, stats = parsed
                target = log.train if kind == "train_inner" else log.valid
                target[int(stats["num_updates"])] = stats
    return log
