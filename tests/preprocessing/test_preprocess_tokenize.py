"""Tokenizers and line cutting: ids equal fairseq's GPT-2 encoder, dictionaries load in fairseq,
no line longer than the limit, sentencepiece training is deterministic."""
from __future__ import annotations

import argparse
import random

import numpy as np
import pytest

from longformer_preprocessing.segment import cut_points, encode_document
from longformer_preprocessing.tokenizer import (
    EOS,
    Gpt2Tokenizer,
    SentencePieceTokenizer,
    train_sentencepiece,
    write_dict,
)
from preprocessing_helpers import fake_text

LINES = [
    "In the beginning God created the heaven and the earth.",
    "  leading and trailing spaces  ",
    "Numbers 12345 and 3.14, contractions: don't, we'll, they're.",
    "Unicode: naïve café, Ελληνικά, 日本語, emoji 🙂, tabs\tand  double  spaces",
    "the the the and and of of",
]


def test_gpt2_ids_equal_fairseq_encoder(gpt2_files):
    from fairseq.data.encoders.gpt2_bpe import GPT2BPE

    fairseq_bpe = GPT2BPE(argparse.Namespace(gpt2_encoder_json=gpt2_files["encoder_json"], gpt2_vocab_bpe=gpt2_files["vocab_bpe"]))
    ours = Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    for line in LINES:
        expected = [int(t) for t in fairseq_bpe.encode(line).split()]
        assert ours.encode_ids(line) == expected
    merged = ours.encode_ids("the and of")
    assert any(i >= 256 for i in merged), "the fixture's merges must be exercised"


def test_gpt2_dictionary_matches_fairseq(tmp_path, gpt2_files):
    from fairseq.data import Dictionary
    from fairseq.data.encoders.gpt2_bpe import GPT2BPE

    tok = Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    path = str(tmp_path / "dict.txt")
    size = write_dict(path, tok.symbols, None)
    d = Dictionary.load(path)
    assert len(d) == size == tok.dictionary_size and size % 8 == 0
    fairseq_bpe = GPT2BPE(argparse.Namespace(gpt2_encoder_json=gpt2_files["encoder_json"], gpt2_vocab_bpe=gpt2_files["vocab_bpe"]))
    for line, ids in zip(LINES, tok.encode_lines(LINES)):
        # What fairseq-preprocess stores for this line (without the </s>).
        expected = d.encode_line(fairseq_bpe.encode(line), append_eos=False, add_if_not_exist=False).tolist()
        assert ids.tolist() == expected

    # With --srcdict (e.g. RoBERTa's dict.txt, in its own order): ids are looked up in it.
    src = str(tmp_path / "src.txt")
    order = list(range(len(tok.symbols)))
    random.Random(0).shuffle(order)
    with open(src, "w") as f:
        for i in order[:-5]:  # five ids missing -> <unk>
            f.write(f"{i} 1\n")
    tok2 = Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"], srcdict=src)
    d2 = Dictionary.load(src)
    for line, ids in zip(LINES, tok2.encode_lines(LINES)):
        assert ids.tolist() == d2.encode_line(fairseq_bpe.encode(line), append_eos=False, add_if_not_exist=False).tolist()


@pytest.mark.parametrize("max_len", [1, 2, 7, 50])
def test_cut_points_never_exceed_limit(max_len):
    rng = np.random.default_rng(max_len)
    n_vocab = 40
    word_start = rng.random(n_vocab) < 0.5
    sentence_end = rng.random(n_vocab) < 0.1
    for n in [max_len + 1, 3 * max_len, 10 * max_len + 3]:
        ids = rng.integers(0, n_vocab, size=n)
        cuts = cut_points(ids, max_len, word_start, sentence_end)
        bounds = [0] + cuts + [n]
        pieces = [ids[a:b] for a, b in zip(bounds, bounds[1:])]
        assert all(1 <= len(p) <= max_len for p in pieces)
        assert np.array_equal(np.concatenate(pieces), ids)


def test_cut_prefers_sentence_end(gpt2_files):
    tok = Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    text = " ".join(["The lord said unto him go."] * 40)
    flat, sizes, n_tokens, n_unk, n_split = encode_document(tok, text, 60)
    assert n_split == 1 and max(sizes) - 1 <= 60 and n_unk == 0
    pieces = np.split(flat, np.cumsum(sizes)[:-1])
    assert all(p[-1] == EOS for p in pieces)
    decoded = [tok.bpe.decode([t - 4 for t in p[:-1]]) for p in pieces]
    assert "".join(decoded) == text  # cutting the token sequence loses nothing
    assert all(d.endswith("go.") for d in decoded[:-1]), decoded  # cut after sentence ends


@pytest.fixture(scope="module")
def spm_sample(tmp_path_factory):
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("spm")
    path = str(folder / "sample.txt")
    with open(path, "w") as f:
        for _ in range(300):
            f.write(fake_text(rng, 30) + "\n")
    return path


def test_sentencepiece_training_is_deterministic(tmp_path, spm_sample):
    from fairseq.data import Dictionary

    with open(spm_sample) as f:
        sample = f.read().splitlines()
    m1 = train_sentencepiece(sample, str(tmp_path / "a.model"), 400, seed=1)
    m2 = train_sentencepiece(iter(sample), str(tmp_path / "b.model"), 400, seed=1)
    with open(m1, "rb") as f1, open(m2, "rb") as f2:
        assert f1.read() == f2.read()
    tok = SentencePieceTokenizer(m1)
    path = str(tmp_path / "dict.txt")
    size = write_dict(path, tok.symbols, None)
    d = Dictionary.load(path)
    assert len(d) == size == tok.dictionary_size
    (ids,) = tok.encode_lines(["the lord said unto him"])
    pieces = tok.sp.encode("the lord said unto him", out_type=str)
    assert [d[i] for i in ids.tolist()] == pieces
    # Characters outside the vocabulary fall back to bytes instead of <unk>.
    (ids,) = tok.encode_lines(["日本"])
    assert 3 not in ids.tolist()
