"""``longformer-coref-score KEY RESPONSE``: score a coreference response against a key, both
CoNLL-2012 files or folders of ``*_conll`` files (documents paired by their ``#begin document``
line, literally: ``part 0`` is not ``part 000``; the unpaired are named in one warning line), as
the official scorer (conll/reference-coreference-scorers v8.01) does: recall,
precision and F1 of the mention identification and of MUC, B-cubed, CEAF-m and CEAF-e, in the
scorer's own lines (counts, then percentages cut to two decimals), and the CoNLL score (the mean
F1 of MUC, B-cubed and CEAF-e). ``--json``: the same as one JSON object with full precision.

Refused in one line, as the scorer refuses them: a malformed document (it names the first one),
more than 10 repeated response mentions. Refused here besides: no document in common, and a
response document whose word count differs from its key's (spans would not mean the same words).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

from longformer_common.cli import one_line_errors

from .conll2012 import BEGIN, OUTSIDE, CorefDocument, read_documents
from ..evaluation.coref import CONLL_METRICS, MAX_REPEATED, METRICS, Counts, TooManyRepeatedMentions, conll_f1, \
    score_documents

PROG = "longformer-coref-score"
RULE = "-" * 74


def _perl_number(x: float) -> str:
    """A number as Perl prints it (15 significant digits, no trailing zeros)."""
    return f"{x:.15g}"


def rpf_line(counts: Counts) -> str:
    """The scorer's ``ShowRPF`` line: percentages cut (not rounded) to two decimals."""
    def pct(x):
        return _perl_number(int(x * 10000) / 100)

    return (f"Recall: ({_perl_number(counts.recall_num)} / {_perl_number(counts.recall_den)}) {pct(counts.recall)}%"
            f"\tPrecision: ({_perl_number(counts.precision_num)} / {_perl_number(counts.precision_den)}) "
            f"{pct(counts.precision)}%\tF1: {pct(counts.f1)}%")


def _read(role: str, path: str) -> Dict[str, CorefDocument]:
    if not os.path.exists(path):
        sys.exit(f"{PROG}: error: {role} {path}: no such file or folder; give a CoNLL-2012 file or a folder of "
                 "*_conll files")
    try:
        documents, bad = read_documents(path)
    except (OSError, ValueError) as e:
        sys.exit(f"{PROG}: error: {role} {e}")
    if not documents and all(b.reason == OUTSIDE for b in bad):
        sys.exit(f"{PROG}: error: {role} {path}: no '#begin document' ... '#end document' block; give a "
                 "CoNLL-2012 file or a folder of *_conll files")
    if bad:
        more = f" (and {len(bad) - 1} more bad records)" if len(bad) > 1 else ""
        sys.exit(f"{PROG}: error: {role} {bad[0]}{more}; fix the file (the official scorer stops there too)")
    return {scorer_name(d): d for d in documents}


def scorer_name(document: CorefDocument) -> str:
    """What the official scorer pairs documents by: the ``#begin document`` line's text after
    "begin document ", character for character (``(ID); part 000`` and ``(ID); part 0`` differ)."""
    return BEGIN.match(document.header).group(1)


def _some(names: List[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def score_files(key_path: str, response_path: str) -> Dict[str, Counts]:
    """Counts of every metric (``evaluation.coref.score_documents``), or exit with one line."""
    keys, responses = _read("KEY", key_path), _read("RESPONSE", response_path)
    common = [k for k in keys if k in responses]
    if not common:
        sys.exit(f"{PROG}: error: no document of RESPONSE {response_path} is in KEY {key_path} (documents pair by "
                 f"their '#begin document (ID); part N' line; KEY has e.g. {next(iter(keys))!r})")
    for k in common:
        if len(keys[k]) != len(responses[k]):
            sys.exit(f"{PROG}: error: document {keys[k].key}: RESPONSE has {len(responses[k])} words, KEY {len(keys[k])}; "
                     "the response must keep the key's rows")
    missing = [k for k in keys if k not in responses]
    extra = [k for k in responses if k not in keys]
    if missing or extra:  # one warning line naming them
        said = ([f"{len(missing)} KEY documents have no response (scored as empty responses): {_some(missing)}"]
                if missing else []) + ([f"{len(extra)} RESPONSE documents are not in KEY (ignored): {_some(extra)}"]
                                       if extra else [])
        print(f"{PROG}: warning: {'; '.join(said)}; documents pair by their '#begin document' line character for "
              "character, as the official scorer pairs them", file=sys.stderr)
    try:
        return score_documents({k: d.entities for k, d in keys.items()},
                               {k: d.entities for k, d in responses.items()}, max_repeated=MAX_REPEATED)
    except TooManyRepeatedMentions as e:
        sys.exit(f"{PROG}: error: RESPONSE {response_path}: {e}")


def report(scores: Dict[str, Counts]) -> str:
    lines = []
    for metric in METRICS:
        lines += [f"METRIC {metric}:", "", "====== TOTALS =======",
                  "Identification of Mentions: " + rpf_line(scores["mentions"]), RULE,
                  "Coreference: " + rpf_line(scores[metric]), RULE, ""]
    f1s = ", ".join(f"{m} {100 * scores[m].f1:.2f}" for m in CONLL_METRICS)
    lines.append(f"CoNLL score (mean F1 of {f1s}): {100 * conll_f1(scores):.2f}")
    return "\n".join(lines)


def as_json(scores: Dict[str, Counts]) -> dict:
    out = {name: {"recall_num": c.recall_num, "recall_den": c.recall_den, "precision_num": c.precision_num,
                  "precision_den": c.precision_den, "recall": c.recall, "precision": c.precision, "f1": c.f1}
           for name, c in scores.items()}
    out["conll_f1"] = conll_f1(scores)
    return out


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key", metavar="KEY", help="the key: a CoNLL-2012 file or a folder of *_conll files")
    p.add_argument("response", metavar="RESPONSE", help="the response: a file or folder (longformer_coref's "
                                                        "--write-conll output)")
    p.add_argument("--json", action="store_true", help="print one JSON object (counts, recall, precision, F1 of "
                                                       "each metric, conll_f1) instead of the scorer's lines")
    args = p.parse_args(argv)
    scores = score_files(args.key, args.response)
    print(json.dumps(as_json(scores), indent=1) if args.json else report(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
