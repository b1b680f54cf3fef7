"""Corpus statistics in the format of the Longformer paper's Table 6 (source, tokens, average
document length), plus the split sizes, selection counts and the bad-input report."""
from __future__ import annotations

import collections
import json
from typing import Dict, List

from .destination import output_options
from .document import BAD_INPUT_KINDS
from .options import SOURCES

SOURCE_TITLES = {
    "books": "Books",
    "wikipedia": "English Wiki",
    "realnews": "Realnews",
    "stories": "Stories",
    "jsonl": "JSON lines",
    "text": "Plain text",
}

BAD_INPUT_HELP = {
    "unreadable_file": "files that could not be opened or decompressed (rest of the file skipped)",
    "empty_file": "empty files (or only whitespace)",
    "empty_document": "empty documents (no text, or no tokens)",
    "too_long_document": "documents longer than --max-doc-chars (skipped)",
    "json_parse_error": "JSON lines that do not parse or are not objects (skipped)",
    "missing_text_field": "JSON objects without a string text field (skipped)",
    "malformed_document": "WikiExtractor <doc> blocks not closed / text outside blocks (skipped)",
    "invalid_utf8_document": "documents with bytes that are not UTF-8 (replaced by U+FFFD, or skipped with --invalid-utf8 skip)",
}


def human(n: float) -> str:
    """0.5B / 2.1B / 95.9K / 506 as in the paper's table."""
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return f"{n:.0f}" if float(n).is_integer() else f"{n:.1f}"


class BadInputReport:
    """Counts of bad input per kind, with the first few examples of each."""

    MAX_EXAMPLES = 5

    def __init__(self):
        self.counts: Dict[str, int] = {k: 0 for k in BAD_INPUT_KINDS}
        self.examples: Dict[str, List[str]] = {k: [] for k in BAD_INPUT_KINDS}

    def add(self, kind: str, where: str, detail: str = "") -> bool:
        """Count one; returns True for the first few of a kind (worth a log line)."""
        self.counts[kind] += 1
        if len(self.examples[kind]) < self.MAX_EXAMPLES:
            self.examples[kind].append(f"{where}: {detail}" if detail else where)
            return True
        return False

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict:
        return {
            "counts": dict(self.counts),
            "examples": {k: v for k, v in self.examples.items() if v},
        }

    def summary_lines(self) -> List[str]:
        lines = []
        for kind in BAD_INPUT_KINDS:
            if self.counts[kind]:
                lines.append(f"  {self.counts[kind]:>10,}  {BAD_INPUT_HELP[kind]}")
        return lines


def render_markdown(stats: dict) -> str:
    out = ["# Corpus statistics", ""]
    out.append("Format of the Longformer paper's Table 6; tokens are the output tokenizer's, without the")
    out.append("end-of-line </s> tokens fairseq adds.")
    out.append("")
    out.append("| Source | Documents | Tokens | Avg doc len |")
    out.append("|---|---:|---:|---:|")
    for name, row in stats["sources"].items():
        avg = row["tokens"] / row["documents"] if row["documents"] else 0
        out.append(f"| {SOURCE_TITLES.get(name, name)} | {row['documents']:,} | {human(row['tokens'])} | {human(avg)} |")
    tot = stats["total"]
    avg = tot["tokens"] / tot["documents"] if tot["documents"] else 0
    out.append(f"| **Total** | {tot['documents']:,} | {human(tot['tokens'])} | {human(avg)} |")
    out.append("")
    out.append("| Split | Documents | Tokens | Lines (items) |")
    out.append("|---|---:|---:|---:|")
    for split, row in stats["splits"].items():
        out.append(f"| {split} | {row['documents']:,} | {row['tokens']:,} | {row['lines']:,} |")
    out.append("")
    sel = stats["selection"]
    if any(sel.values()):
        out.append("Selection: " + ", ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in sel.items()))
        out.append("")
    bad = stats["bad_input"]["counts"]
    if any(bad.values()):
        out.append("Bad input: " + ", ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in bad.items() if v))
    else:
        out.append("Bad input: none.")
    out.append("")
    return "\n".join(out)


def dump_json(stats: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, sort_keys=False)
        f.write("\n")


def corpus_stats(a, source_stats, selection, report, spec, writer, dictionary_size: int) -> dict:
    """The stats.json of a run: per source (the paper's Table 6 columns), the splits written by
    ``writer`` (a ``binarize.SplitWriter``), the selection counts, the bad-input ``report`` and the
    options that shaped the output."""
    sources = collections.OrderedDict()
    for source in SOURCES:
        if getattr(a, source):
            st = source_stats.get(source, {"documents": 0, "tokens": 0, "lines": 0, "split_lines": 0, "unk_tokens": 0})
            row = dict(st)
            row["avg_doc_len"] = round(st["tokens"] / st["documents"], 1) if st["documents"] else 0.0
            sources[source] = row
    total_docs = sum(r["documents"] for r in sources.values())
    total_tokens = sum(r["tokens"] for r in sources.values())
    return {
        "tokenizer": {
            "kind": spec.kind,
            "dictionary_size": dictionary_size,
            "srcdict": a.srcdict is not None,
            "trained_sentencepiece_vocab": a.train_sentencepiece,
        },
        "sources": sources,
        "total": {
            "documents": total_docs,
            "tokens": total_tokens,
            "avg_doc_len": round(total_tokens / total_docs, 1) if total_docs else 0.0,
            "unk_tokens": sum(r["unk_tokens"] for r in sources.values()),
        },
        "splits": {
            s: {"documents": writer.docs[s], "tokens": writer.tokens[s], "lines": writer.items[s] - writer.docs[s]}
            for s in writer.SPLITS
        },
        "selection": dict(selection),
        "bad_input": report.to_json(),
        "options": output_options(a),
    }
