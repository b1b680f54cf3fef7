"""longformer-prepare-task's readers of the published datasets (IMDB, Hyperpartisan, TriviaQA,
arXiv), each on a small copy written in the published schema: the examples that come out of
the binaries, the bad records counted per reason, the Table 7 statistics; labels with
whitespace refused; the answer search linear."""
from __future__ import annotations

import json
import random
import time

import pytest

from longformer_preprocessing.evaluation.answers import triviaqa_normalize
from longformer_preprocessing.tasks import answer_spans, hyperpartisan
from longformer_preprocessing.tasks.cli import main
from preprocessing_helpers import read_split
from published_samples import write_aclimdb, write_arxiv, write_hyperpartisan, write_triviaqa


@pytest.fixture(scope="module")
def bpe(gpt2_files):
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    return get_encoder(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])


def decode(bpe, tokens, eos=True):
    """dict.txt without --srcdict: index = 4 + BPE id; drop the final </s>."""
    return bpe.decode([t - 4 for t in (tokens[:-1] if eos else tokens)])


def run(capsys, *args):
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().out


def stats_of(out):
    return json.loads((out / "stats.json").read_text())


def check_table7(stats):
    for split in stats["splits"].values():
        tokens = split["tokens"]
        assert 0 < tokens["mean"] <= tokens["max"] and tokens["p50"] <= tokens["p95"] <= tokens["max"]


def test_imdb_reads_aclimdb_folders(tmp_path, gpt2_args, bpe, capsys):
    wrote = write_aclimdb(tmp_path / "aclImdb" / "train", 5, seed=1)
    write_aclimdb(tmp_path / "aclImdb" / "test", 3, seed=2)
    out = tmp_path / "out"
    printed = run(capsys, "imdb", "--train", tmp_path / "aclImdb" / "train", "--valid", tmp_path / "aclImdb" / "test",
                  "--destdir", out, *gpt2_args)
    stats = stats_of(out)
    train = stats["splits"]["train"]
    assert train["examples"] == wrote["examples"] == 10 and stats["splits"]["valid"]["examples"] == 6
    assert train["dropped_by_reason"] == {k: v for k, v in wrote.items() if k != "examples"}
    assert "train: 1 dropped: not UTF-8" in printed
    assert (out / "label" / "dict.txt").read_text() == "neg 5\npos 5\n"  # unsup/ ignored
    texts = [decode(bpe, t) for t in read_split(str(out / "input0"), "train")]
    assert texts[0].endswith(".\nDull.") and "<br" not in "".join(texts)
    assert texts[5].endswith(".\n\nA fine film.")  # pos after neg: label 0 is negative
    labels = [t[0] - 4 for t in read_split(str(out / "label"), "train")]
    assert labels == [0] * 5 + [1] * 5
    check_table7(stats)


def test_imdb_refuses_a_folder_without_pos_and_neg(tmp_path, gpt2_args, capsys):
    (tmp_path / "train").mkdir()
    with pytest.raises(SystemExit):
        main(["imdb", "--train", str(tmp_path / "train"), "--valid", str(tmp_path / "train"),
              "--destdir", str(tmp_path / "out"), *gpt2_args])
    assert "is not an aclImdb split folder (it needs pos/ and neg/)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_destdir_overlapping_an_input_is_refused(tmp_path, gpt2_args, capsys):
    write_aclimdb(tmp_path / "aclImdb" / "train", 2, seed=1)
    before = sorted(p.name for p in (tmp_path / "aclImdb" / "train").iterdir())
    for destdir in (tmp_path / "aclImdb", tmp_path / "aclImdb" / "train", tmp_path / "aclImdb" / "train" / "pos"):
        with pytest.raises(SystemExit):
            main(["imdb", "--train", str(tmp_path / "aclImdb" / "train"), "--valid", str(tmp_path / "aclImdb" / "train"),
                  "--destdir", str(destdir), "--overwrite", *gpt2_args])
        assert "overlaps the input" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "aclImdb" / "train").iterdir()) == before


def test_hyperpartisan_xml_and_the_seeded_80_10_10_split(tmp_path, gpt2_args, bpe, capsys):
    wrote = write_hyperpartisan(tmp_path, 20, seed=3)
    out = tmp_path / "out"
    run(capsys, "hyperpartisan", "--articles", tmp_path / "articles-training-byarticle-20181122.xml",
        "--labels", tmp_path / "ground-truth-training-byarticle-20181122.xml", "--destdir", out, *gpt2_args)
    stats = stats_of(out)
    assert [stats["splits"][s]["examples"] for s in ("train", "valid", "test")] == [16, 2, 2]
    assert stats["splits"]["train"]["dropped_by_reason"] == {k: v for k, v in wrote.items() if k != "texts"}
    split = hyperpartisan.split_ids(list(wrote["texts"]), hyperpartisan.SEED)
    for name in ("train", "valid", "test"):
        got = [decode(bpe, t) for t in read_split(str(out / "input0"), name)]
        assert got == [wrote["texts"][i][0] for i in split[name]]  # title, then <p> text with links
    # another seed, another split of the same articles
    assert hyperpartisan.split_ids(list(wrote["texts"]), 2)["test"] != split["test"]
    check_table7(stats)


def test_hyperpartisan_keeps_the_articles_before_broken_xml(tmp_path):
    write_hyperpartisan(tmp_path, 6, seed=3)
    articles = tmp_path / "articles-training-byarticle-20181122.xml"
    text = articles.read_text()
    articles.write_text(text[:text.index('<article id="0000004"')] + "<article id=\"0000004\"><p>cut")
    examples, bad = hyperpartisan.read_articles(str(articles), str(tmp_path / "ground-truth-training-byarticle-20181122.xml"))
    assert [i for i, _ in examples] == ["0000000", "0000001", "0000002", "0000003"]
    assert len(bad) == 1 and "is not well-formed XML" in bad[0].reason


def test_triviaqa_pages_aliases_and_truncation(tmp_path, gpt2_args, capsys):
    wrote = write_triviaqa(tmp_path, 4, seed=4)
    out = tmp_path / "out"
    run(capsys, "triviaqa", "--train", tmp_path / "qa" / "wikipedia-train.json",
        "--valid", tmp_path / "qa" / "wikipedia-dev.json", "--evidence", tmp_path / "evidence" / "wikipedia",
        "--destdir", out, "--max-train-context-tokens", "200", *gpt2_args)
    stats = stats_of(out)
    assert stats["splits"]["train"]["examples"] == 4 and stats["splits"]["valid"]["examples"] == 5  # a 2-page question
    for split in ("train", "valid"):
        assert stats["splits"][split]["dropped_by_reason"] == {"page file missing": 1,
                                                                "page file outside the evidence folder": 1}
    train = [json.loads(line) for line in (out / "train.qa.jsonl").read_text().splitlines()]
    valid = [json.loads(line) for line in (out / "valid.qa.jsonl").read_text().splitlines()]
    contexts = read_split(str(out), "train.context")
    for record, tokens in zip(train, contexts):
        assert len(tokens) == len(record["token_chars"]) <= 200  # training pages cut
        assert record["normalization"] == "triviaqa" and record["question_id"].startswith("tq_train_")
        name = record["page"].split("_")[0]
        assert record["answers"] == sorted({name.lower(), f"{name.lower()} bible"})
        for first, last in record["spans"]:
            chars = record["token_chars"]
            assert record["context"][chars[first][0]:chars[last][1]].rstrip(".'s") in (name, f"{name}'")
    assert stats["splits"]["train"]["tokens"]["mean"] > stats["splits"]["train"]["tokens_written"]["mean"]
    for record, tokens in zip(valid, read_split(str(out), "valid.context")):
        if record["question_id"].split("_")[-1] != record["page"].split("_")[-1][:-4]:
            continue  # question 0's second page is about another name
        name = record["page"].split("_")[0]
        chars = record["token_chars"]
        found = [record["context"][chars[a][0]:chars[b][1]] for a, b in record["spans"]]
        assert len(tokens) == len(chars) and chars[-1][1] == len(record["context"].rstrip())  # the whole page
        assert f"{name}'s" in found and name in found  # "The Name's" at the very end, found too
    check_table7(stats)


def test_arxiv_into_translation_binaries(tmp_path, gpt2_args, bpe, capsys):
    wrote = write_arxiv(tmp_path / "train.txt", 6, seed=5)
    write_arxiv(tmp_path / "val.txt", 3, seed=6)
    out = tmp_path / "out"
    run(capsys, "arxiv", "--train", tmp_path / "train.txt", "--valid", tmp_path / "val.txt", "--destdir", out,
        "--max-source-tokens", "300", *gpt2_args)
    stats = stats_of(out)
    assert stats["splits"]["train"]["examples"] == 6
    assert stats["splits"]["train"]["dropped_by_reason"] == {k: v for k, v in wrote.items() if k != "pairs"}
    sources = read_split(str(out), "train.src-tgt.src")
    targets = read_split(str(out), "train.src-tgt.tgt")
    for (source, target), src, tgt in zip(wrote["pairs"], sources, targets):
        assert src[-1] == tgt[-1] == 2 and len(src) <= 300
        assert source.startswith(decode(bpe, src)) and decode(bpe, tgt) == target  # no <S> tags
    assert max(len(s) for s in sources) == 300  # the long articles were cut
    # Table 7's statistics describe the whole articles; what was written is reported beside them
    assert stats["splits"]["train"]["tokens"]["max"] > 300 == stats["splits"]["train"]["tokens_written"]["max"]
    assert (out / "dict.src.txt").read_bytes() == (out / "dict.tgt.txt").read_bytes()
    check_table7(stats)


def test_labels_with_whitespace_are_bad_examples(tmp_path, gpt2_args, capsys):
    rows = [{"text": "a good text", "label": "law"}, {"text": "more text", "label": "two words"},
            {"text": "and more", "label": "line\nbreak"}, {"text": "last", "label": "law"}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    printed = run(capsys, "classification", "--train", tmp_path / "t.jsonl", "--valid", tmp_path / "t.jsonl",
                  "--destdir", tmp_path / "out", *gpt2_args)
    assert (tmp_path / "out" / "label" / "dict.txt").read_text() == "law 2\n"
    assert "train: 2 dropped: label with whitespace" in printed


def _brute_force_text(context, answers):
    """Every occurrence by trying each character offset."""
    words = answer_spans.words_of(context)
    found = set()
    for text, given in answers:
        for offset in range(len(context)):
            if context.startswith(text, offset) and (offset == given or (
                    not (offset > 0 and context[offset - 1].isalnum())
                    and not (offset + len(text) < len(context) and context[offset + len(text)].isalnum()))):
                first = max(i for i, (s, _) in enumerate(words) if s <= offset)
                last = max(i for i, (s, _) in enumerate(words) if s <= offset + len(text) - 1)
                found.add((first, last))
    return sorted(found)


def test_answer_search_matches_a_brute_force_search():
    rng = random.Random(0)
    vocab = ["abel", "Abel", "abel,", "cain", "the", "The", "U.S.", "us", "a", "abelard"]
    for _ in range(200):
        context = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 30)))
        text = rng.choice(["abel", "Abel", "the abel", "U.S.", "a"])
        answers = [(text, None)]
        assert answer_spans.text_occurrences(context, answer_spans.words_of(context), answers) \
            == _brute_force_text(context, answers)
        words = context.split()
        normalized = [triviaqa_normalize(w) for w in words]
        alias = triviaqa_normalize(text)
        expected = set()
        for i in range(len(words)):  # brute force over word ranges whose normalization is the alias
            for j in range(i, len(words)):
                if normalized[i] and normalized[j] and " ".join(n for n in normalized[i:j + 1] if n) == alias:
                    expected.add((i, j))
        assert set(answer_spans.alias_occurrences(words, [text])) == expected, (context, text)


def test_answer_search_is_fast_on_a_100k_word_page():
    rng = random.Random(1)
    words = [rng.choice(["lorem", "ipsum", "dolor", "sit", "amet,", "abelard"]) for _ in range(100_000)]
    for position in rng.sample(range(100_000 - 2), 1000):
        words[position:position + 2] = ["Abel", "Cain."]
    context = " ".join(words)
    spans = answer_spans.words_of(context)
    start = time.perf_counter()
    found = answer_spans.text_occurrences(context, spans, [("Abel Cain", None)])
    aliases = answer_spans.alias_occurrences(words, ["abel cain", "the abel"])
    elapsed = time.perf_counter() - start
    expected = sum(1 for i in range(len(words) - 1) if words[i:i + 2] == ["Abel", "Cain."])
    # "the abel" is "abel" once normalized: every "Abel", and every "Abel Cain." once more
    assert len(found) == expected >= 900 and len(aliases) == expected + sum(1 for w in words if w == "Abel")
    assert elapsed < 1.0, elapsed
