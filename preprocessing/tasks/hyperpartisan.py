"""SemEval-2019 task 4 (Hyperpartisan News Detection, Kiesel et al. 2019), by-article data as
published: ``articles-training-byarticle-20181122.xml``
(``<articles><article id=".." published-at=".." title=".."><p>text <a href="..">link</a>
..</p>..</article>..</articles>``) and ``ground-truth-training-byarticle-20181122.xml``
(``<articles><article id=".." hyperpartisan="true|false" labeled-by="article" url=".."/>..``).

Examples: the title, then the text of each ``<p>`` with its inline elements (links, emphasis),
one paragraph a line; label ``true`` or ``false``. The task's test set is not public, so the
paper splits the 645 labeled articles 80/10/10 into train/valid/test; here the article ids are
sorted, shuffled with ``random.Random(SEED)`` (``--split-seed``, default 1) and cut at 80% and
90%. Bad records (reported under ``train``, the split the whole file feeds first): an article
without an id, a repeated id, an article without a label or with one not ``true``/``false``,
an empty article, and a file that stops being XML (the articles before the break are kept).
"""
from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from typing import Dict, Iterator, List, Tuple, Union

from .examples import BadExample, Classification

SEED = 1
FRACTIONS = (0.8, 0.1)  # train, valid; test takes the rest


def _elements(path: str, bad: List[BadExample]) -> Iterator[ET.Element]:
    """The ``<article>`` elements of ``path`` as they close; a parse error ends the file."""
    try:
        for _, element in ET.iterparse(path, events=("end",)):
            if element.tag == "article":
                yield element
    except ET.ParseError as e:
        bad.append(BadExample(f"{path} is not well-formed XML from line {e.position[0]} on (the rest skipped)"))


def article_text(element: ET.Element) -> str:
    """Title, then one line per paragraph (inline elements' text included)."""
    paragraphs = element.findall(".//p") or [element]
    lines = [line for line in (" ".join("".join(p.itertext()).split()) for p in paragraphs) if line]
    if not lines:  # a title alone is no article
        return ""
    title = " ".join((element.get("title") or "").split())
    return "\n".join([title, *lines] if title else lines)


def read_labels(path: str, bad: List[BadExample]) -> Dict[str, str]:
    labels: Dict[str, str] = {}
    for element in _elements(path, bad):
        article_id, label = element.get("id"), element.get("hyperpartisan")
        if article_id:
            labels[article_id] = label
        element.clear()
    return labels


def read_articles(articles: str, labels_path: str) -> Tuple[List[Tuple[str, Classification]], List[BadExample]]:
    """(id, example) of every usable article, and the bad records."""
    bad: List[BadExample] = []
    labels = read_labels(labels_path, bad)
    examples, seen = [], set()
    for element in _elements(articles, bad):
        article_id = element.get("id")
        text = article_text(element)
        element.clear()
        if not article_id:
            bad.append(BadExample("article without id"))
        elif article_id in seen:
            bad.append(BadExample("repeated article id"))
        elif article_id not in labels:
            bad.append(BadExample("article without a label in the ground truth"))
        elif labels[article_id] not in ("true", "false"):
            bad.append(BadExample("hyperpartisan label not true/false"))
        elif not text:
            bad.append(BadExample("empty article"))
        else:
            seen.add(article_id)
            examples.append((article_id, Classification(text, labels[article_id])))
    return examples, bad


def split_ids(ids: List[str], seed: int) -> Dict[str, List[str]]:
    """The paper's 80/10/10 split of the sorted ids, shuffled with ``seed``."""
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    n_train, n_valid = round(FRACTIONS[0] * len(order)), round(FRACTIONS[1] * len(order))
    return {"train": order[:n_train], "valid": order[n_train:n_train + n_valid], "test": order[n_train + n_valid:]}


def read_splits(articles: str, labels: str, seed: int) -> Dict[str, List[Union[Classification, BadExample]]]:
    examples, bad = read_articles(articles, labels)
    by_id = dict(examples)
    splits = split_ids(list(by_id), seed)
    out = {split: [by_id[i] for i in ids] for split, ids in splits.items()}
    out["train"] = bad + out["train"]
    return out
