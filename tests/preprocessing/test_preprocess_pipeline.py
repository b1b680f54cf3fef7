"""The whole pipeline on a small mixed corpus: selection, determinism, document structure,
line lengths, splits, fairseq loading, stats, skip-when-done."""
from __future__ import annotations

import json
import os
import random
from fractions import Fraction

import pytest

from longformer_preprocessing.sampling import below_fraction, content_digest, unit_hash
from longformer_preprocessing.segment import encode_document
from longformer_preprocessing.tokenizer import Gpt2Tokenizer
from preprocessing_helpers import (
    decode_gpt2_documents,
    fake_text,
    output_bytes,
    read_split,
    split_documents,
    write_jsonl,
    write_text,
)

MAX_LINE = 62  # --tokens-per-sample 64 -> masked-LM blocks of 63 with room for <s>
RN_MIN = 400


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every source format, some compressed. Each document's first line is a unique tag."""
    rng = random.Random(1234)
    root = tmp_path_factory.mktemp("corpus")
    docs = {}  # tag -> (source, full document text as the pipeline sees it)

    for i, ext in enumerate(["", ".gz", ".xz", "", ".gz", ""]):
        tag = f"book{i}"
        # paragraphs, some far longer than MAX_LINE tokens
        paras = [fake_text(rng, rng.choice([10, 40, 200])) for _ in range(6)]
        text = tag + "\n\n" + "\n\n".join(paras) + "\n"
        write_text(str(root / "books" / f"{i:02d}-{tag}.txt{ext}"), text)
        docs[tag] = ("books", text)

    wiki_xml = []
    for i in range(4):
        tag = f"wiki{i}"
        body = f"{tag}\n\n{fake_text(rng, 60)}\n{fake_text(rng, 30)}"
        wiki_xml.append(f'<doc id="{i}" url="u{i}" title="{tag}">\n{body}\n</doc>\n')
        docs[tag] = ("wikipedia", body)
    write_text(str(root / "wiki" / "AA" / "wiki_00"), "".join(wiki_xml))
    records = []
    for i in range(4, 8):
        tag = f"wiki{i}"
        body = f"{tag}\n\n{fake_text(rng, 50)}"
        records.append({"id": str(i), "url": "u", "title": tag, "text": body})
        docs[tag] = ("wikipedia", body)
    write_jsonl(str(root / "wiki" / "AB" / "wiki_00.gz"), records)

    records = []
    for i in range(90):
        tag = f"news{i}"
        body = fake_text(rng, rng.randint(20, 260))
        records.append({"url": f"https://n/{i}", "title": tag, "text": body, "domain": "n"})
        docs[tag] = ("realnews", tag + "\n" + body)
    write_jsonl(str(root / "realnews.jsonl.xz"), records)

    for i in range(30):
        tag = f"story{i}"
        text = f"{tag}\n{fake_text(rng, 80)}\n"
        write_text(str(root / "stories" / f"s{i:03d}.txt") + (".gz" if i % 3 == 0 else ""), text)
        docs[tag] = ("stories", text[:-1])  # as the reader yields it: lines joined, no final newline

    write_jsonl(str(root / "generic.jsonl"), [{"content": f"json{i}\n{fake_text(rng, 40)}"} for i in range(3)])
    for i in range(3):
        docs[f"json{i}"] = ("jsonl", None)
    write_text(str(root / "plain.txt.bz2"), "\n\n".join(f"text{i}\n{fake_text(rng, 30)}" for i in range(3)))
    for i in range(3):
        docs[f"text{i}"] = ("text", None)

    inputs = [
        "--books", str(root / "books"),
        "--wikipedia", str(root / "wiki"),
        "--realnews", str(root / "realnews.jsonl.xz"),
        "--stories", str(root / "stories"),
        "--jsonl", str(root / "generic.jsonl"), "--jsonl-text-field", "content",
        "--text", str(root / "plain.txt.bz2"),
        "--realnews-min-tokens", str(RN_MIN),
        "--max-line-tokens", str(MAX_LINE),
    ]
    return {"root": root, "docs": docs, "inputs": inputs}


def expected_tags(corpus, gpt2_files, seed):
    tok = Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    keep = set()
    for tag, (source, text) in corpus["docs"].items():
        if source == "realnews":
            n_tokens = encode_document(tok, text, MAX_LINE)[2]
            if n_tokens > RN_MIN and below_fraction(unit_hash(seed, "realnews", content_digest(text)), Fraction(1, 3)):
                keep.add(tag)
        elif source == "stories":
            if below_fraction(unit_hash(seed, "stories", content_digest(text)), Fraction(1, 3)):
                keep.add(tag)
        else:
            keep.add(tag)
    return keep


def output_tags(destdir, gpt2_files, splits=("train", "valid", "test")):
    tags = {}
    for split in splits:
        for doc in decode_gpt2_documents(destdir, split, gpt2_files):
            tags[doc[0].split()[0]] = split
    return tags


@pytest.fixture(scope="module")
def reference_run(corpus, gpt2_args, tmp_path_factory):
    from longformer_preprocessing import preprocess

    dest = str(tmp_path_factory.mktemp("out") / "ref")
    stats = preprocess(corpus["inputs"] + gpt2_args + ["--destdir", dest, "--seed", "7", "--valid-docs", "3", "--test-docs", "2", "--no-progress"])
    return dest, stats


def test_selection(corpus, gpt2_files, reference_run):
    dest, stats = reference_run
    tags = output_tags(dest, gpt2_files)
    assert set(tags) == expected_tags(corpus, gpt2_files, seed=7)
    long_news = [t for t, (s, text) in corpus["docs"].items() if s == "realnews" and t in tags]
    n_long = sum(
        1 for t, (s, text) in corpus["docs"].items()
        if s == "realnews" and encode_document(Gpt2Tokenizer(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"]), text, MAX_LINE)[2] > RN_MIN
    )
    assert 10 < n_long < 80, "the fixture must have Realnews documents on both sides of the threshold"
    assert 0 < len(long_news) < n_long  # a fraction of the long ones
    n_stories = sum(1 for t in tags if t.startswith("story"))
    assert 3 <= n_stories <= 20  # about a third of 30
    sel = stats["selection"]
    assert sel["stories_not_sampled"] == 30 - n_stories
    assert sel["realnews_not_sampled"] + sel["realnews_below_min_tokens"] + len(long_news) == 90
    assert stats["sources"]["realnews"]["documents"] == len(long_news)


def test_splits_and_document_boundaries(corpus, gpt2_files, reference_run):
    dest, stats = reference_run
    tags = output_tags(dest, gpt2_files)
    splits = list(tags.values())
    assert splits.count("valid") == 3 and splits.count("test") == 2
    assert stats["splits"]["valid"]["documents"] == 3
    # every document, in every split, ends with an empty item (just </s>); none is empty
    for split in ("train", "valid", "test"):
        items = read_split(dest, split)
        assert items[-1] == [2]
        docs = split_documents(items)
        assert all(len(doc) >= 1 for doc in docs)
        assert len(docs) == stats["splits"][split]["documents"]


def test_lines_cut_to_max_line_tokens_and_lossless(corpus, gpt2_files, reference_run):
    dest, stats = reference_run
    longest = max(len(item) for split in ("train", "valid", "test") for item in read_split(dest, split))
    assert longest <= MAX_LINE + 1  # tokens + </s>
    assert stats["sources"]["books"]["split_lines"] > 0  # the fixture has long paragraphs
    decoded = {doc[0].split()[0]: doc for doc in decode_gpt2_documents(dest, "train", gpt2_files)}
    for tag, (source, text) in corpus["docs"].items():
        if tag in decoded and text is not None:
            lines = [s.strip() for s in text.split("\n") if s.strip()]
            assert "".join(decoded[tag]) == "".join(lines)


def test_same_seed_same_bytes_any_worker_count(corpus, gpt2_args, reference_run, tmp_path, run_preprocess):
    dest, _ = reference_run
    other = str(tmp_path / "again")
    run_preprocess(corpus["inputs"] + gpt2_args + ["--destdir", other, "--seed", "7", "--valid-docs", "3", "--test-docs", "2", "--workers", "2"])
    assert output_bytes(other) == output_bytes(dest)


def test_different_seed_changes_selection(corpus, gpt2_files, gpt2_args, reference_run, tmp_path, run_preprocess):
    dest, _ = reference_run
    other = str(tmp_path / "seed8")
    run_preprocess(corpus["inputs"] + gpt2_args + ["--destdir", other, "--seed", "8", "--valid-docs", "3", "--test-docs", "2"])
    a, b = output_tags(dest, gpt2_files), output_tags(other, gpt2_files)
    assert set(b) == expected_tags(corpus, gpt2_files, seed=8)
    assert {t for t in a if t.startswith(("news", "story"))} != {t for t in b if t.startswith(("news", "story"))}
    assert {t for t, s in a.items() if s == "valid"} != {t for t, s in b.items() if s == "valid"}


def test_split_fractions(corpus, gpt2_files, gpt2_args, tmp_path, run_preprocess):
    dest = str(tmp_path / "frac")
    stats = run_preprocess(corpus["inputs"] + gpt2_args + ["--destdir", dest, "--valid-docs", "0.25", "--test-docs", "1/4"])
    n = stats["total"]["documents"]
    assert sum(s["documents"] for s in stats["splits"].values()) == n
    for split in ("valid", "test"):
        assert 0.05 * n < stats["splits"][split]["documents"] < 0.5 * n
    assert stats["splits"]["train"]["tokens"] + stats["splits"]["valid"]["tokens"] + stats["splits"]["test"]["tokens"] == stats["total"]["tokens"]


def test_loads_in_fairseq_complete_doc(corpus, gpt2_args, reference_run, tmp_path, run_preprocess):
    """fairseq's own loader + TokenBlockDataset(complete_doc): no block longer than the block
    size. Without the line cut (a huge --max-line-tokens) the same corpus breaks that (fairseq issue #5167)."""
    from fairseq.data import Dictionary, TokenBlockDataset, data_utils

    def max_block(dest):
        d = Dictionary.load(os.path.join(dest, "dict.txt"))
        ds = data_utils.load_indexed_dataset(os.path.join(dest, "train"), d, dataset_impl="mmap")
        assert ds is not None and len(ds) > 0
        blocks = TokenBlockDataset(ds, ds.sizes, MAX_LINE + 1, pad=d.pad(), eos=d.eos(), break_mode="complete_doc", document_sep_len=1)
        assert len(blocks) > 0
        return max(len(blocks[i]) for i in range(len(blocks)))

    dest, _ = reference_run
    assert max_block(dest) <= MAX_LINE + 1
    uncut = str(tmp_path / "uncut")
    run_preprocess(corpus["inputs"] + gpt2_args + ["--destdir", uncut, "--max-line-tokens", "100000", "--valid-docs", "0", "--test-docs", "0"])
    assert max_block(uncut) > MAX_LINE + 1


def test_dictionary_and_stats_files(reference_run):
    from fairseq.data import Dictionary

    dest, stats = reference_run
    d = Dictionary.load(os.path.join(dest, "dict.txt"))
    assert len(d) % 8 == 0 and d.index("104") == 4 + 104  # GPT-2 ids, in id order
    with open(os.path.join(dest, "stats.json")) as f:
        assert json.load(f) == json.loads(json.dumps(stats))
    md = open(os.path.join(dest, "stats.md")).read()
    assert "| Source | Documents | Tokens | Avg doc len |" in md
    for title in ("Books", "English Wiki", "Realnews", "Stories"):
        assert f"| {title} |" in md
    books = stats["sources"]["books"]
    assert books["documents"] == 6 and books["avg_doc_len"] == round(books["tokens"] / 6, 1)
    assert stats["bad_input"]["counts"]["json_parse_error"] == 0


def test_finished_run_is_skipped(corpus, gpt2_args, tmp_path, run_preprocess, capsys):
    dest = str(tmp_path / "skip")
    args = corpus["inputs"] + gpt2_args + ["--destdir", dest]
    run_preprocess(args)
    mtimes = {n: os.stat(os.path.join(dest, n)).st_mtime_ns for n in os.listdir(dest)}
    capsys.readouterr()
    run_preprocess(args)
    assert "skipping" in capsys.readouterr().err
    assert {n: os.stat(os.path.join(dest, n)).st_mtime_ns for n in os.listdir(dest)} == mtimes
    run_preprocess(args + ["--seed", "3"])  # other arguments: redone
    assert "skipping" not in capsys.readouterr().err


def test_sentencepiece_trained_by_the_pipeline(corpus, tmp_path, run_preprocess):
    from fairseq.data import Dictionary

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    common = corpus["inputs"] + ["--train-sentencepiece", "400", "--valid-docs", "2", "--test-docs", "2"]
    stats = run_preprocess(common + ["--destdir", a])
    run_preprocess(common + ["--destdir", b, "--workers", "2"])
    assert output_bytes(a) == output_bytes(b)
    assert stats["tokenizer"]["kind"] == "sentencepiece"
    d = Dictionary.load(os.path.join(a, "dict.txt"))
    assert len(d) == stats["tokenizer"]["dictionary_size"]
    assert max(len(item) for item in read_split(a, "train")) <= MAX_LINE + 1
    # the shipped model reproduces the stored ids
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(a, "spm.model"))
    first = split_documents(read_split(a, "train"))[0][0]
    assert first[-1] == 2 and sp.decode([sp.piece_to_id(d[i]) for i in first[:-1]]).split()[0].startswith("book")
