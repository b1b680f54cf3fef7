"""arXiv and PubMed summarization (Cohan et al. 2018, ``arxiv-dataset.zip``/``pubmed-dataset.zip``)
as published: ``{train,val,test}.txt``, JSON lines ``{"article_id": str, "article_text":
[sentence, ...], "abstract_text": ["<S> sentence </S>", ...], "labels": .., "section_names":
[..], "sections": [[..], ..]}``.

Examples: the article's sentences joined by spaces -> the abstract's sentences without their
``<S>``/``</S>`` tags, joined by spaces; the writer cuts sources to ``--max-source-tokens``
(16,384 by default: the LED's encoder positions in the paper's arXiv experiments) and targets to
``--max-target-tokens`` (1,024: the decoder's positions). Bad records: broken JSON, a missing or
non-list ``article_text``/``abstract_text``, an empty article or abstract.
"""
from __future__ import annotations

import re
from typing import Iterator, Union

from .examples import BadExample, Summary
from .jsonl import read_jsonl

_TAGS = re.compile(r"</?S>")


def _sentences(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadExample(f"missing or non-list '{name}'")
    text = " ".join(" ".join(_TAGS.sub(" ", s).split()) for s in value).strip()
    if not text:
        raise BadExample(f"empty '{name}'")
    return text


def read(path: str) -> Iterator[Union[Summary, BadExample]]:
    for obj in read_jsonl(path):
        if isinstance(obj, BadExample):
            yield obj
            continue
        try:
            yield Summary(_sentences(obj, "article_text"), _sentences(obj, "abstract_text"))
        except BadExample as e:
            yield e
