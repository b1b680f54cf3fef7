"""``longformer-preprocess-chars`` (preprocessing/chars.py) on small synthetic inputs: split sizes
(the standard 90M/5M/5M rule, scaled down), exact round trips bytes -> ids -> bytes through
fairseq's own reader, files identical to what fairseq-preprocess makes of the space-separated
symbols, the unigram baseline, and clear errors."""
import math
import random
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import MMapIndexedDataset

from longformer_preprocessing import chars
from longformer_preprocessing.chars import CharDataError, decode_split, prepare

BIN = Path(sys.executable).parent


def _random_bytes(n, seed=0):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


def _items(destdir, split):
    ds = MMapIndexedDataset(str(destdir / split))
    return [ds[i].tolist() for i in range(len(ds))]


def test_enwik8_split_is_the_standard_rule_scaled_down_and_round_trips(tmp_path, monkeypatch):
    """enwik8's rule (first 90M train, next 5M valid, last 5M test) at 1,000 / 50 / 50 bytes."""
    monkeypatch.setattr(chars, "STANDARD_UNITS", 1000)
    monkeypatch.setattr(chars, "STANDARD_HELDOUT", 50)
    data = _random_bytes(1000) + b""
    data = data[:500] + b"\n\r\x00\xff" + data[504:]  # the bytes a text reader would mangle
    (tmp_path / "enwik8").write_bytes(data)
    summary = prepare("enwik8", [str(tmp_path / "enwik8")], str(tmp_path / "out"))
    out = tmp_path / "out"
    assert {n: s["units"] for n, s in summary["splits"].items()} == {"train": 900, "valid": 50, "test": 50}
    assert {n: s["tokens"] for n, s in summary["splits"].items()} == {"train": 901, "valid": 51, "test": 51}
    assert decode_split(str(out), "train") == data[:900]
    assert decode_split(str(out), "valid") == data[900:950]
    assert decode_split(str(out), "test") == data[950:]
    # every byte value is a symbol, named by its decimal value, and the items end with </s>
    d = Dictionary.load(str(out / "dict.txt"))
    assert len(d) == 4 + 256 and {d[i] for i in range(4, len(d))} == {str(b) for b in range(256)}
    (item,) = _items(out, "valid")
    assert item[-1] == d.eos() and [int(d[i]) for i in item[:-1]] == list(data[900:950])
    # a file of another size is not enwik8 unless both sizes are given
    (tmp_path / "short").write_bytes(data[:999])
    with pytest.raises(CharDataError, match="enwik8 is 1,000 bytes, the input has 999"):
        prepare("enwik8", [str(tmp_path / "short")], str(tmp_path / "out2"))
    prepare("enwik8", [str(tmp_path / "short")], str(tmp_path / "out2"), valid_size="9", test_size="90")
    assert decode_split(str(tmp_path / "out2"), "test") == data[909:999]


def _fairseq_preprocess(lines, destdir, tmp_path, name):
    """fairseq's own binarizer on one line per item of space-separated symbols, with our dict."""
    text = tmp_path / f"{name}.txt"
    text.write_text("".join(" ".join(line) + "\n" for line in lines), encoding="utf-8")
    ref = tmp_path / f"ref-{name}"
    subprocess.run([str(BIN / "fairseq-preprocess"), "--only-source", "--srcdict", str(destdir / "dict.txt"),
                    "--trainpref", str(text), "--destdir", str(ref), "--workers", "1", "--dataset-impl", "mmap"],
                   check=True, capture_output=True)
    return ref / "train"


def _symbol(c):
    """The symbol rule, written out independently: whitespace and control characters escaped."""
    return f"<U+{ord(c):04X}>" if c in " \t\n\r\x0b\x0c\x85\u2028\u00a0\x1c\ufeff" or ord(c) < 32 else c


def test_chars_documents_pieces_and_fairseq_preprocess_equality(tmp_path):
    docs = ["héllo wörld\r\nsecond line\n", "\ufeff日本語\tx\u2028y z", "<s> </s> _ # 1 2 \u00a0end" + " of the third document" * 3]
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"doc{i}.txt")
        paths[-1].write_text(doc, encoding="utf-8", newline="")
    corpus = "".join(docs)
    summary = prepare("chars", [str(p) for p in paths], str(tmp_path / "out"), valid_size="20", test_size="10")
    out = tmp_path / "out"
    n = len(corpus)
    assert {s: v["units"] for s, v in summary["splits"].items()} == {"train": n - 30, "valid": 20, "test": 10}
    # exact round trip, and each split is its slice of the corpus
    assert decode_split(str(out), "train") + decode_split(str(out), "valid") + decode_split(str(out), "test") == corpus
    assert decode_split(str(out), "valid") == corpus[n - 30:n - 10]
    # one item per document piece: doc 2 is longer than valid + test, so train holds docs 0, 1
    # and the start of doc 2, valid and test one piece of it each
    assert [len(x) for x in _items(out, "train")] == [len(docs[0]) + 1, len(docs[1]) + 1, len(docs[2]) - 30 + 1]
    # the same ids as fairseq-preprocess on the space-separated symbols of each piece
    pieces = [docs[0], docs[1], docs[2][:-30]]
    ref = _fairseq_preprocess([[_symbol(c) for c in p] for p in pieces], out, tmp_path, "chars")
    assert (out / "train.bin").read_bytes() == Path(str(ref) + ".bin").read_bytes()
    assert np.array_equal(MMapIndexedDataset(str(ref)).sizes, MMapIndexedDataset(str(out / "train")).sizes)
    d = Dictionary.load(str(out / "dict.txt"))
    assert d.unk() not in sum(_items(out, "train") + _items(out, "valid") + _items(out, "test"), [])


def test_enwik8_bytes_equal_fairseq_preprocess_of_the_decimal_symbols(tmp_path, monkeypatch):
    data = _random_bytes(300, seed=1)
    (tmp_path / "data").write_bytes(data)
    prepare("bytes", [str(tmp_path / "data")], str(tmp_path / "out"), valid_size="0.1", test_size="0.1")
    ref = _fairseq_preprocess([[str(b) for b in data[:240]]], tmp_path / "out", tmp_path, "bytes")
    assert (tmp_path / "out" / "train.bin").read_bytes() == Path(str(ref) + ".bin").read_bytes()


def test_text8_zip_and_the_unigram_baseline(tmp_path, monkeypatch):
    monkeypatch.setattr(chars, "STANDARD_UNITS", 2000)
    monkeypatch.setattr(chars, "STANDARD_HELDOUT", 100)
    rng = random.Random(2)
    text = "".join(rng.choice("aaaaeeettn hs zq") for _ in range(2000))
    with zipfile.ZipFile(tmp_path / "text8.zip", "w") as z:
        z.writestr("text8", text)
    summary = prepare("text8", [str(tmp_path / "text8.zip")], str(tmp_path / "out"))
    out = tmp_path / "out"
    assert decode_split(str(out), "test") == text[1900:]
    assert summary["symbols"] == len(set(text))
    # the baseline by hand: add-one smoothed train frequencies over the symbols and </s>
    train, valid = text[:1800], text[1800:1900]
    counts = Counter(train)
    counts["</s>"] += 1  # train's one item ends with </s>
    for c in set(text):
        counts[c] += 1
    counts["</s>"] += 1
    total = sum(counts.values())
    want = -sum(math.log2(counts[c] / total) for c in list(valid) + ["</s>"]) / (len(valid) + 1)
    assert summary["unigram_bits_per_char"]["valid"] == pytest.approx(want, abs=1e-4)
    # text8 is lower-case letters and spaces only
    (tmp_path / "bad").write_text(text[:1000] + "A" + text[1001:])
    with pytest.raises(CharDataError, match="found 'A' at character 1,000"):
        prepare("text8", [str(tmp_path / "bad")], str(tmp_path / "out2"))


def test_clear_errors(tmp_path):
    (tmp_path / "a.txt").write_text("some text\n" * 10)
    (tmp_path / "bin").write_bytes(b"ok \xff\xfe broken")
    cases = [
        (dict(fmt="chars", inputs=[str(tmp_path / "missing.txt")]), "does not exist"),
        (dict(fmt="chars", inputs=[str(tmp_path / "bin")]), "not UTF-8 text .byte 3.*--format bytes"),
        (dict(fmt="chars", inputs=[str(tmp_path / "a.txt")], valid_size="60", test_size="40"), "leave no training data"),
        (dict(fmt="chars", inputs=[str(tmp_path / "a.txt")], valid_size="1.5"), "whole number >= 0 or a fraction"),
        (dict(fmt="chars", inputs=[str(tmp_path / "a.txt")], valid_size="ten"), "a number of units"),
        (dict(fmt="enwik8", inputs=[str(tmp_path / "a.txt")] * 2), "one file, got 2"),
    ]
    for kwargs, message in cases:
        with pytest.raises(CharDataError, match=message):
            prepare(destdir=str(tmp_path / "out"), **kwargs)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(CharDataError, match="is empty"):
        prepare("chars", [str(tmp_path / "empty.txt")], str(tmp_path / "out"))
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        z.writestr("a", "x")
        z.writestr("b", "y")
    with pytest.raises(CharDataError, match="exactly one file, it holds 2"):
        prepare("chars", [str(tmp_path / "two.zip")], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # nothing written by a failed run
    # the command line: exit status 2 and the message; an existing output is kept
    prepare("chars", [str(tmp_path / "a.txt")], str(tmp_path / "out"))
    result = subprocess.run([str(BIN / "longformer-preprocess-chars"), "--format", "chars", str(tmp_path / "a.txt"),
                             "--destdir", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 2 and "exists and is not empty (pass --overwrite" in result.stderr


def test_prompts_and_printed_symbols_round_trip():
    """What fairseq-interactive reads and prints, to and from text (chars and bytes)."""
    from longformer_preprocessing.chars import symbols_to_text, text_to_symbols

    text = "And God said,\n\tlet there be é\u2028"
    symbols = text_to_symbols(text)
    assert symbols.split()[:4] == ["A", "n", "d", "<U+0020>"] and "<U+000A>" in symbols.split()
    assert symbols_to_text(symbols + " </s>") == text
    assert text_to_symbols("é\n", "bytes") == "195 169 10"
    assert symbols_to_text("195 169 10", "bytes") == "é\n"
