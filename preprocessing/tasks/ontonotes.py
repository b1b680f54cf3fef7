"""OntoNotes coreference (CoNLL-2012 ``*_conll`` files or folders, read by ``conll2012``) binarized
for the task ``longformer_coref``.

Each document part becomes one item: its words encoded one by one into the model's subwords (a
GPT-2 word after the first carries its leading space, as in running text; OntoNotes' escaped
``/.`` and ``/?`` are read as ``.`` and ``?``, as mandarjoshi90/coref's ``minimize.py`` does), with
the word and the sentence of every subword kept. Layout (``--destdir``):

  {split}.tokens.bin/.idx   the subwords of each document, no specials
  {split}.coref.jsonl       per document: ``key`` (``ID_P``), ``header`` (the ``#begin document``
                            line, which the scorer pairs documents by), ``doc_id``, ``part``,
                            ``genre``, ``sentences`` and ``speakers`` (words per sentence),
                            ``clusters`` (the gold entities as inclusive word spans, what the
                            metrics score against), ``word`` and ``sentence`` (per subword: the
                            document word and the sentence it belongs to), ``subword_clusters``
                            (the gold entities as inclusive subword spans: what the model learns)
  dict.txt, stats.json, stats.md (the paper's Table 7: subwords per document, <s> and </s> included)

Bad records (``conll2012``'s reasons, plus a document whose words have no subwords) are counted
and dropped; a gold mention over words without subwords is dropped and counted.
"""
from __future__ import annotations

import json
from typing import Iterator, List, Union

import numpy as np

from .conll2012 import BadDocument, CorefDocument, iter_documents
from .examples import BadExample
from .writers import SplitWriter, encode_words

ONTONOTES_COLUMNS = 12  # id, part, number, word, POS, parse, lemma, frameset, sense, speaker, NE, coref
ESCAPED = {"/.": ".", "/?": "?"}


def read(path: str) -> Iterator[Union[CorefDocument, BadDocument]]:
    """The documents of a ``*_conll`` file or a folder of them, and their bad records."""
    return iter_documents(path, min_columns=ONTONOTES_COLUMNS)


def subword_maps(tokenizer, document: CorefDocument):
    """(tokens (T,), word (T,), sentence (T,)): the document's subwords, the document word and the
    sentence of each."""
    words = [ESCAPED.get(w, w) for w in document.words]
    spans, at = [], 0
    for w in words:
        spans.append((at, at + len(w)))
        at += len(w) + 1
    tokens, word = encode_words(tokenizer, " ".join(words), spans)
    sentence_of_word = np.repeat(np.arange(len(document.sentences)), [len(s) for s in document.sentences])
    return tokens, word, sentence_of_word[word] if len(word) else word


def subword_clusters(clusters, word: np.ndarray, n_words: int):
    """Word-span clusters -> subword-span clusters (first subword of the first word, last of the
    last), and the number of mentions dropped because their words have no subwords."""
    first = np.searchsorted(word, np.arange(n_words), side="left")
    last = np.searchsorted(word, np.arange(n_words), side="right") - 1
    out, dropped = [], 0
    for mentions in clusters:
        spans = [(int(first[a]), int(last[b])) for a, b in mentions if first[a] <= last[b]]
        dropped += len(mentions) - len(spans)
        if spans:
            out.append(spans)
    return out, dropped


class CorefWriter(SplitWriter):
    side_file = "coref.jsonl"

    def __init__(self, folder, tokenizer, options):
        super().__init__(folder, tokenizer, options)
        self.dropped_mentions = {}  # split -> gold mentions over words without subwords

    def start_split(self, split: str) -> None:
        super().start_split(split)
        self.dropped_mentions[split] = 0

    def write(self, split: str, document: CorefDocument):
        tokens, word, sentence = subword_maps(self.tokenizer, document)
        if len(tokens) == 0:
            raise BadExample("document without subwords")
        clusters, dropped = subword_clusters(document.clusters, word, len(document))
        self.dropped_mentions[split] += dropped
        self.builders.add(self.path(f"{split}.tokens"), tokens)
        record = {"key": document.key, "header": document.header, "doc_id": document.doc_id, "part": document.part,
                  "genre": document.genre, "sentences": document.sentences, "speakers": document.speakers,
                  "clusters": [[list(m) for m in c] for c in document.clusters],
                  "word": word.tolist(), "sentence": sentence.tolist(),
                  "subword_clusters": [[list(m) for m in c] for c in clusters]}
        self.side.write(json.dumps(record) + "\n")
        self.count(split, tokens)
        return len(tokens) + 2, len(tokens) + 2  # <s> document </s>

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.folder)
        for split, n in self.dropped_mentions.items():
            if n:
                stats["splits"][split].setdefault("truncated", {})["gold mentions dropped (words without subwords)"] = n


def texts(document: CorefDocument) -> List[str]:
    """The sentences a sentencepiece model is trained on."""
    return [" ".join(ESCAPED.get(w, w) for w in sentence) for sentence in document.sentences]


def load_records(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
