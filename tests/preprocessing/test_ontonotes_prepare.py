"""``longformer-prepare-task ontonotes`` on schema-exact CoNLL-2012 samples (the reader's own test
sample: nested mentions, several marks on one word, one-word mentions, speakers, two parts): the
hand-checked clusters come out in words and in subwords, every subword decodes to the word its
map names, and each malformed kind is counted and reported."""
import json

from longformer_preprocessing.tasks.cli import main
from longformer_preprocessing.tasks import conll2012

from tests.preprocessing.test_conll2012 import DOC, SAMPLE, _row


def subword_strings(prefix, gpt2_files):
    """The first document's subwords, each decoded alone (dict.txt without --srcdict: index = 4 + BPE id)."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    bpe = get_encoder(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    return [bpe.decode([int(t) - 4]) for t in MMapIndexedDataset(str(prefix))[0]]


def bad_documents() -> str:
    def doc(name, *rows):
        return "\n".join([f"#begin document ({name}); part 000", *rows, "", "#end document"])

    return "\n".join([
        doc("nw/unbalanced", _row(0, 0, "a", "DT", "*", "-", "*", "(3", ()), _row(0, 1, "b", "NN", "*", "-", "*", "-", ())),
        doc("nw/never_opened", _row(0, 0, "a", "DT", "*", "-", "*", "4)", ())),
        "#begin document (nw/empty); part 000\n#end document",
        doc("nw/columns", _row(0, 0, "a", "DT", "*", "-", "*", "-", ()), _row(0, 1, "b", "NN", "*", "-", "*", "-")),
    ]) + "\n"


def test_ontonotes_words_subwords_and_bad_records(tmp_path, gpt2_args, gpt2_files, capsys):
    (tmp_path / "train_conll").write_text(SAMPLE)
    (tmp_path / "valid_conll").write_text(SAMPLE + bad_documents())
    out = tmp_path / "out"
    assert main(["ontonotes", "--train", str(tmp_path / "train_conll"), "--valid", str(tmp_path / "valid_conll"),
                 "--destdir", str(out), *map(str, gpt2_args)]) == 0
    report = capsys.readouterr().out
    stats = json.loads((out / "stats.json").read_text())["splits"]["valid"]
    assert stats["examples"] == 2 and stats["dropped_by_reason"] == {
        conll2012.UNBALANCED: 1, conll2012.NEVER_OPENED: 1, conll2012.EMPTY: 1, conll2012.COLUMNS_DISAGREE: 1}
    for reason in stats["dropped_by_reason"]:
        assert f"valid: 1 dropped: {reason}" in report

    records = [json.loads(line) for line in (out / "valid.coref.jsonl").read_text().splitlines()]
    first, second = records
    assert (first["key"], first["genre"], second["key"]) == (f"{DOC}_0", "bc", f"{DOC}_1")
    assert first["clusters"] == [[[0, 1], [3, 4], [0, 4], [7, 7]], [[7, 8], [10, 10]]]
    assert first["speakers"] == [["Paula_Zahn"] * 10, ["Jane_Doe"] * 3]
    words = [w for sentence in first["sentences"] for w in sentence]
    tokens = subword_strings(out / "valid.tokens", gpt2_files)
    assert len(tokens) == len(first["word"]) == len(first["sentence"])
    for w in range(len(words)):  # the subwords the map gives word w spell it
        assert "".join(t for t, owner in zip(tokens, first["word"]) if owner == w).strip() == words[w]
    assert first["sentence"] == [0 if w < 10 else 1 for w in first["word"]]
    for word_cluster, subword_cluster in zip(first["clusters"], first["subword_clusters"]):
        for (a, b), (s, e) in zip(word_cluster, subword_cluster):
            assert "".join(tokens[s:e + 1]).strip() == " ".join(words[a:b + 1])
