"""Readers: every source format, plain and compressed, yielding documents lazily."""
from __future__ import annotations

import gzip
import os

import pytest

from longformer_preprocessing import document as D
from longformer_preprocessing.document import ReaderConfig
from longformer_preprocessing.reader_books import read_books
from longformer_preprocessing.reader_jsonl import read_jsonl
from longformer_preprocessing.reader_realnews import read_realnews
from longformer_preprocessing.reader_stories import read_stories
from longformer_preprocessing.reader_text import read_text
from longformer_preprocessing.reader_wikipedia import read_wikipedia
from longformer_preprocessing.textio import list_input_files
from preprocessing_helpers import write_jsonl, write_text

CFG = ReaderConfig()


def texts(docs):
    return [d.text for d in docs]


@pytest.mark.parametrize("ext", ["", ".gz", ".xz", ".bz2"])
def test_books_one_document_per_file(tmp_path, ext):
    path = write_text(str(tmp_path / f"book.txt{ext}"), "Title\n\nFirst paragraph.\r\nSecond one.\n")
    docs = list(read_books(path, "book", CFG))
    assert texts(docs) == ["Title\n\nFirst paragraph.\nSecond one."]
    assert docs[0].problem is None and not docs[0].bad_utf8


def test_stories_one_story_per_file(tmp_path):
    path = write_text(str(tmp_path / "s.txt.xz"), "Once upon a time.\nThe end.\n")
    assert texts(read_stories(path, "s", CFG)) == ["Once upon a time.\nThe end."]


@pytest.mark.parametrize("ext", ["", ".gz", ".xz"])
def test_wikipedia_doc_blocks(tmp_path, ext):
    content = (
        '<doc id="12" url="https://en.wikipedia.org/wiki?curid=12" title="Anarchism">\n'
        "Anarchism\n\nAnarchism is a political philosophy.\nIt is old.\n</doc>\n"
        '<doc id="25" url="https://en.wikipedia.org/wiki?curid=25" title="Autism">\n'
        "Autism\n\nAutism is a condition.\n</doc>\n"
    )
    path = write_text(str(tmp_path / f"wiki_00{ext}"), content)
    docs = list(read_wikipedia(path, "AA/wiki_00", CFG))
    assert texts(docs) == [
        "Anarchism\n\nAnarchism is a political philosophy.\nIt is old.",
        "Autism\n\nAutism is a condition.",
    ]
    assert "id 12" in docs[0].name


def test_wikipedia_json_lines(tmp_path):
    path = write_jsonl(str(tmp_path / "wiki_01.gz"), [
        {"id": "12", "url": "u", "title": "Anarchism", "text": "Anarchism\n\nAnarchism is a philosophy."},
        {"id": "25", "url": "u", "title": "Autism", "text": "Autism\n\nAutism is a condition."},
    ])
    assert texts(read_wikipedia(path, "wiki_01", CFG)) == [
        "Anarchism\n\nAnarchism is a philosophy.",
        "Autism\n\nAutism is a condition.",
    ]


def test_realnews_title_and_text(tmp_path):
    path = write_jsonl(str(tmp_path / "realnews.jsonl.xz"), [
        {"url": "https://x", "title": "Big news", "text": "Something happened.\nMore.", "domain": "x.com"},
        {"url": "https://y", "title": None, "text": "No title here."},
    ])
    assert texts(read_realnews(path, "realnews", CFG)) == ["Big news\nSomething happened.\nMore.", "No title here."]


def test_jsonl_configurable_field(tmp_path):
    path = write_jsonl(str(tmp_path / "c.jsonl"), [{"body": "one"}, {"body": "two"}])
    cfg = ReaderConfig(jsonl_text_field="body")
    assert texts(read_jsonl(path, "c", cfg)) == ["one", "two"]


@pytest.mark.parametrize("ext", ["", ".gz"])
def test_text_blank_line_breaks(tmp_path, ext):
    path = write_text(str(tmp_path / f"t.txt{ext}"), "\n\ndoc one line one\ndoc one line two\n\n\n\ndoc two\n   \ndoc three")
    docs = list(read_text(path, "t", CFG))
    assert texts(docs) == ["doc one line one\ndoc one line two", "doc two", "doc three"]
    assert docs[1].name == "t:8"  # 1-based line where it starts


def test_readers_are_lazy(tmp_path):
    """Documents come out before the rest of the file is read: a corrupt tail only affects
    what follows it (and is reported, not raised)."""
    good = gzip.compress(b"first doc\n\nsecond doc\n\n" + b"x" * 100000)
    path = str(tmp_path / "t.txt.gz")
    with open(path, "wb") as f:
        f.write(good[: len(good) - 200])  # a truncated archive
    docs = read_text(path, "t", CFG)
    first = next(docs)
    assert first.text == "first doc"
    rest = list(docs)
    assert texts(rest[:1]) == ["second doc"]
    assert rest[-1].problem == D.UNREADABLE_FILE


def test_document_too_long_is_not_kept(tmp_path):
    cfg = ReaderConfig(max_doc_chars=1000)
    path = write_text(str(tmp_path / "b.txt"), "short line\n" + "y" * 5000 + "\nend\n")
    (doc,) = read_books(path, "b", cfg)
    assert doc.problem == D.TOO_LONG and doc.text is None
    path = write_jsonl(str(tmp_path / "j.jsonl"), [{"text": "z" * 1001}, {"text": "ok"}])
    docs = list(read_jsonl(path, "j", cfg))
    assert [d.problem for d in docs] == [D.TOO_LONG, None]


def test_folder_walk_sorted_skips_hidden_and_docs(tmp_path):
    for rel in ["b/2.txt", "a.txt", "b/10.txt.gz", ".hidden.txt", "README.md", "b/LICENSE"]:
        write_text(str(tmp_path / rel), "x")
    names = [name for _, name in list_input_files(str(tmp_path))]
    assert names == ["a.txt", os.path.join("b", "10.txt.gz"), os.path.join("b", "2.txt")]
