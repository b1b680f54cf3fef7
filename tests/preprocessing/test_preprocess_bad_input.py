"""Bad input is counted and reported, never fatal for the run, never silent; a run whose every
input is bad fails with a clear error."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from preprocessing_helpers import decode_gpt2_documents, write_bytes, write_jsonl, write_text

MAX_CHARS = 3000


@pytest.fixture
def bad_corpus(tmp_path):
    books = tmp_path / "books"
    write_text(str(books / "good.txt"), "goodbook\nIn the beginning.\n")
    write_bytes(str(books / "latin1.txt"), "badutf8book\ncaf\xe9 au lait\n".encode("latin-1"))
    write_bytes(str(books / "empty.txt"), b"")
    write_bytes(str(books / "blank.txt.gz"), b"  \n\n \t\n")
    write_text(str(books / "huge.txt"), "hugebook\n" + ("word " * MAX_CHARS) + "\n")
    write_bytes(str(books / "corrupt.txt.gz"), b"\x1f\x8b\x08\x00 this is not really gzip data" * 3, compress=False)

    lines = [
        json.dumps({"text": "goodjson\nfine."}),
        "this is not json",
        "[1, 2, 3]",
        json.dumps({"title": "no text field"}),
        json.dumps({"text": 5}),
        json.dumps({"text": "   \n  "}),
        '{"text": "surrogatejson \\ud800 lone"}',
        json.dumps({"text": "z" * (MAX_CHARS + 1)}),
        "",
    ]
    write_text(str(tmp_path / "docs.jsonl.xz"), "\n".join(lines) + "\n")

    write_text(str(tmp_path / "wiki" / "wiki_00"), (
        "stray text before any doc\n"
        '<doc id="1" title="a">\ngoodwikione\ntext\n</doc>\n'
        '<doc id="2" title="b">\nunclosed\n'
        '<doc id="3" title="c">\ngoodwikitwo\ntext\n</doc>\n'
    ))
    return [
        "--books", str(books),
        "--jsonl", str(tmp_path / "docs.jsonl.xz"),
        "--wikipedia", str(tmp_path / "wiki"),
        "--max-doc-chars", str(MAX_CHARS),
        "--valid-docs", "0", "--test-docs", "0",
    ]


EXPECTED = {
    "unreadable_file": 1,  # corrupt.txt.gz
    "empty_file": 2,  # empty.txt, blank.txt.gz
    "empty_document": 1,  # {"text": "   "}
    "too_long_document": 2,  # huge.txt, the long JSON text
    "json_parse_error": 2,  # not JSON, a JSON list
    "missing_text_field": 2,  # no field, a number
    "malformed_document": 2,  # stray text, unclosed <doc>
    "invalid_utf8_document": 2,  # latin-1 book, lone surrogate in JSON
}


def test_every_kind_of_bad_input_is_counted(bad_corpus, gpt2_args, gpt2_files, tmp_path, run_preprocess, capsys):
    dest = str(tmp_path / "out")
    stats = run_preprocess(bad_corpus + gpt2_args + ["--destdir", dest])
    err = capsys.readouterr().err
    assert stats["bad_input"]["counts"] == EXPECTED
    with open(os.path.join(dest, "stats.json")) as f:
        assert json.load(f)["bad_input"]["counts"] == EXPECTED
    # reported on stderr: each problem with where it is, then a summary
    for kind in EXPECTED:
        assert f"bad input ({kind.replace('_', ' ')})" in err, kind
    assert "corrupt.txt.gz" in err and "docs.jsonl.xz:2" in err
    assert "bad input (14 in all" in err
    # the good documents and the repaired ones are there; invalid bytes became U+FFFD
    docs = decode_gpt2_documents(dest, "train", gpt2_files)
    firsts = sorted(doc[0].split()[0] for doc in docs)
    assert firsts == sorted(["goodbook", "badutf8book", "goodjson", "surrogatejson", "goodwikione", "goodwikitwo"])
    text = {doc[0].split()[0]: "\n".join(doc) for doc in docs}
    assert "caf\ufffd au lait" in text["badutf8book"] and "\ufffd" in text["surrogatejson"]
    assert "replaced by U+FFFD" in " ".join(stats["bad_input"]["examples"]["invalid_utf8_document"])


def test_invalid_utf8_skip(bad_corpus, gpt2_args, gpt2_files, tmp_path, run_preprocess):
    dest = str(tmp_path / "out")
    stats = run_preprocess(bad_corpus + gpt2_args + ["--destdir", dest, "--invalid-utf8", "skip"])
    assert stats["bad_input"]["counts"]["invalid_utf8_document"] == 2
    firsts = {doc[0].split()[0] for doc in decode_gpt2_documents(dest, "train", gpt2_files)}
    assert "badutf8book" not in firsts and "surrogatejson" not in firsts and "goodbook" in firsts


def test_all_bad_input_fails_clearly(tmp_path, gpt2_args, run_preprocess):
    write_bytes(str(tmp_path / "in" / "empty.txt"), b"")
    write_bytes(str(tmp_path / "in" / "corrupt.txt.xz"), b"not xz at all", compress=False)
    write_jsonl(str(tmp_path / "bad.jsonl"), [{"title": "no text"}, {"text": None}])
    dest = str(tmp_path / "out")
    with pytest.raises(SystemExit, match="every input was bad: no usable document in 3 input file"):
        run_preprocess(["--books", str(tmp_path / "in"), "--jsonl", str(tmp_path / "bad.jsonl"), "--destdir", dest] + gpt2_args)
    assert not os.path.exists(os.path.join(dest, "train.bin"))
    assert not [n for n in os.listdir(dest) if n.startswith(".tmp")]


def test_all_bad_input_fails_clearly_from_the_command_line(tmp_path, spm_model):
    write_bytes(str(tmp_path / "empty.txt"), b"")
    # (a sentencepiece model: this process then never imports fairseq and torch, which is slow)
    cmd = [sys.executable, "-m", "longformer_preprocessing.cli", "--books", str(tmp_path / "empty.txt"),
           "--destdir", str(tmp_path / "out"), "--no-progress", "--sentencepiece-model", spm_model]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "every input was bad" in proc.stderr and "empty file" in proc.stderr


def test_nothing_selected_fails_clearly(tmp_path, gpt2_args, run_preprocess):
    write_jsonl(str(tmp_path / "news.jsonl"), [{"title": "t", "text": "short news."}] * 3)
    with pytest.raises(SystemExit, match="no document selected from 3 read"):
        run_preprocess(["--realnews", str(tmp_path / "news.jsonl"), "--realnews-fraction", "1", "--destdir", str(tmp_path / "out")] + gpt2_args)


def test_train_sentencepiece_on_all_bad_input_fails_clearly(tmp_path, run_preprocess):
    write_bytes(str(tmp_path / "empty.txt"), b"")
    with pytest.raises(SystemExit, match="every input was bad"):
        run_preprocess(["--books", str(tmp_path / "empty.txt"), "--train-sentencepiece", "500", "--destdir", str(tmp_path / "out")])
