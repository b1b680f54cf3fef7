"""What is done with each example shape: the writer that binarizes it and the texts a
sentencepiece model trains on.

The one module that knows all six shapes (the five of ``examples`` and ``conll2012``'s
``CorefDocument``) and all their writers, so that the shapes' modules and the writers built on
``writers.SplitWriter`` (``multihop_writer``, ``ontonotes``) need not import each other.

    write_splits(folder, tokenizer, options, shape, splits) -> stats
    texts_of(example) -> List[str]
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, Iterator, List, Tuple

from . import ontonotes
from .conll2012 import CorefDocument
from .examples import QA, BadExample, Classification, MultiHop, MultipleChoice, Summary
from .multihop_writer import MultiHopWriter
from .writers import ClassificationWriter, MultipleChoiceWriter, QAWriter, SummaryWriter, percentiles

WRITERS = {Classification: ClassificationWriter, QA: QAWriter, Summary: SummaryWriter,
           MultipleChoice: MultipleChoiceWriter, MultiHop: MultiHopWriter, CorefDocument: ontonotes.CorefWriter}


def texts_of(example) -> List[str]:
    """The texts of an example a sentencepiece model is trained on."""
    if isinstance(example, Classification):
        return [example.text]
    if isinstance(example, QA):
        return [example.question, example.context]
    if isinstance(example, MultipleChoice):
        return [example.question, *example.candidates, *example.supports]
    if isinstance(example, MultiHop):
        return [example.question, *(text for title, sentences in example.paragraphs for text in [title, *sentences])]
    if isinstance(example, CorefDocument):
        return ontonotes.texts(example)
    return [example.source, example.target]


def write_splits(folder: str, tokenizer, options, shape: type,
                 splits: Dict[str, Tuple[str, Callable[[], Iterator]]]) -> dict:
    """Binarize every split (name -> (source description, example generator factory)) into
    ``folder``; returns the statistics. Raises SystemExit naming the split when one ends up empty."""
    writer = WRITERS[shape](folder, tokenizer, options)
    stats = {"kind": options.kind, "tokenizer": options.tokenizer_kind, "splits": {}}
    for split, (source, examples) in splits.items():
        bad, lengths, written = Counter(), [], []
        writer.start_split(split)
        for item in examples():
            try:
                if isinstance(item, BadExample):
                    raise item
                whole, kept = writer.write(split, item)
                lengths.append(whole)
                written.append(kept)
            except BadExample as e:
                bad[e.reason] += 1
        writer.end_split(split)
        stats["splits"][split] = {"file": source, "examples": len(lengths), "dropped": sum(bad.values()),
                                  "dropped_by_reason": dict(sorted(bad.items())), "tokens": percentiles(lengths),
                                  "tokens_written": percentiles(written)}
        if not lengths:
            raise SystemExit(f"longformer-prepare-task: no usable example in {split} ({source}): "
                             + (", ".join(f"{n} {r}" for r, n in bad.most_common()) or "no record found"))
    writer.finish(stats)
    return stats
