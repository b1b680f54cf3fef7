"""IMDB as published (Maas et al. 2011, ``aclImdb_v1.tar.gz``): a split folder
(``aclImdb/train``, ``aclImdb/test``) holds ``pos/`` and ``neg/``, one review per file named
``ID_RATING.txt`` (ratings 7-10 positive, 1-4 negative), UTF-8, with HTML line breaks
``<br />``. ``unsup/`` (unlabeled reviews) and the bag-of-words files are ignored.

Examples: the review with each ``<br />`` turned into a line break; label ``neg`` or ``pos``
(neg first: label 0 is negative, as in Hugging Face's ``imdb``). Bad records: a file name not
``ID_RATING.txt``, a rating on the wrong side for its folder, a file that is not UTF-8, an
empty review.
"""
from __future__ import annotations

import os
import re
from typing import Iterator, Union

from .examples import BadExample, Classification

LABELS = ("neg", "pos")
_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")
_BREAK = re.compile(r"<br\s*/?>", flags=re.IGNORECASE)


def check_folder(folder: str) -> None:
    if not all(os.path.isdir(os.path.join(folder, label)) for label in LABELS):
        raise ValueError(f"{folder} is not an aclImdb split folder (it needs pos/ and neg/): "
                         "pass aclImdb/train or aclImdb/test")


def _rating_fits(label: str, rating: int) -> bool:
    return 7 <= rating <= 10 if label == "pos" else 1 <= rating <= 4


def read(folder: str) -> Iterator[Union[Classification, BadExample]]:
    for label in LABELS:
        sub = os.path.join(folder, label)
        names = sorted(os.listdir(sub), key=lambda n: (len(n), n))
        for name in names:
            match = _NAME.match(name)
            if match is None:
                yield BadExample("file name not ID_RATING.txt")
                continue
            if not _rating_fits(label, int(match.group(2))):
                yield BadExample("rating outside its folder's range")
                continue
            try:
                with open(os.path.join(sub, name), "rb") as f:
                    text = f.read().decode("utf-8")
            except UnicodeDecodeError:
                yield BadExample("not UTF-8")
                continue
            except OSError:
                yield BadExample("unreadable file")
                continue
            text = _BREAK.sub("\n", text).strip()
            if not text:
                yield BadExample("empty review")
                continue
            yield Classification(text, label)
