"""longformer-prepare-task: bad lines counted per reason and reported, answer spans at every
occurrence, and nothing half-written when a split has nothing usable."""
import json

from fairseq.data import data_utils

from tests.support.finetune_data import VALID_EXAMPLES, prepare


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _tokenizer(classification_data):
    return ["--sentencepiece-model", str(classification_data / "spm.model"),
            "--srcdict", str(classification_data / "input0" / "dict.txt")]


def test_classification_bad_lines_are_counted_and_reported(classification_data, tmp_path):
    train = _jsonl(tmp_path / "train.jsonl", [
        {"text": "In the beginning God created the heaven", "label": "law"},
        {"text": "Jesus wept", "label": "gospels"},
        "{broken json",
        {"text": "no label here"},
        {"text": "   ", "label": "law"},
        {"text": 5, "label": "law"},
    ])
    valid = _jsonl(tmp_path / "valid.jsonl", [
        {"text": "And God said, Let there be light", "label": "law"},
        {"text": "a label never seen in train", "label": "poetry"},
    ])
    done = prepare("classification", tmp_path / "out", train, valid, *_tokenizer(classification_data))
    assert done.returncode == 0, done.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["splits"]["train"]["examples"] == 2
    assert stats["splits"]["train"]["dropped_by_reason"] == {
        "broken JSON": 1, "missing or non-string 'label'": 1, "empty 'text'": 1, "missing or non-string 'text'": 1}
    assert stats["splits"]["valid"] == {**stats["splits"]["valid"], "examples": 1, "dropped": 1,
                                        "dropped_by_reason": {"label not in train": 1}}
    assert "4 dropped" in done.stdout and "label not in train" in done.stdout
    assert (tmp_path / "out" / "label" / "dict.txt").read_text() == "law 1\ngospels 1\n"
    tokens = data_utils.load_indexed_dataset(str(tmp_path / "out" / "input0" / "train"), None)
    labels = data_utils.load_indexed_dataset(str(tmp_path / "out" / "label" / "train"), None)
    assert len(tokens) == 2 and tokens[0][-1] == 2  # items end with </s>, as fairseq-preprocess
    assert [labels[i].tolist() for i in range(2)] == [[4, 2], [5, 2]]


def test_qa_spans_cover_every_occurrence_and_bad_answers_are_dropped(classification_data, tmp_path):
    context = "And Cain talked with Abel his brother: and Cain rose up against Abel his brother."
    good = {"question": "who did Cain rise against", "context": context,
            "answers": [{"text": "Abel", "start": context.index("Abel")}]}
    rows = [good,
            {**good, "answers": [{"text": "Abel", "start": 3}]},  # not at its offset
            {**good, "answers": []},
            {"context": context, "answers": good["answers"]}]
    train = _jsonl(tmp_path / "train.jsonl", rows)
    valid = _jsonl(tmp_path / "valid.jsonl", [good])
    done = prepare("qa", tmp_path / "out", train, valid, *_tokenizer(classification_data))
    assert done.returncode == 0, done.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["splits"]["train"]["dropped_by_reason"] == {
        "answer not at its offset": 1, "missing or empty 'answers'": 1, "missing or non-string 'question'": 1}
    record = json.loads((tmp_path / "out" / "train.qa.jsonl").read_text().splitlines()[0])
    assert len(record["spans"]) == 2  # both occurrences of "Abel"
    for first, last in record["spans"]:
        assert context[record["token_chars"][first][0]:record["token_chars"][last][1]] == "Abel"
    tokens = data_utils.load_indexed_dataset(str(tmp_path / "out" / "train.context"), None)
    assert len(tokens[0]) == len(record["token_chars"])


def test_nothing_usable_fails_and_writes_nothing(classification_data, kjv_jsonl, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("an earlier run")
    (out / ".written-by-fairseq-longformer").write_text("")  # an earlier run's: --overwrite may replace it
    bad_valid = _jsonl(tmp_path / "valid.jsonl", ["not json", {"text": "x", "label": "unseen label"}])
    done = prepare("classification", out, kjv_jsonl / "classification.train.jsonl", bad_valid,
                   *_tokenizer(classification_data), "--overwrite")
    assert done.returncode != 0
    assert "no usable example in valid" in done.stderr and "1 broken JSON" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".written-by-fairseq-longformer", "old.txt"]  # untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_kjv_fixture_sizes(classification_data, qa_data):
    stats = json.loads((classification_data / "stats.json").read_text())
    assert stats["splits"]["valid"]["examples"] == VALID_EXAMPLES
    qa = json.loads((qa_data / "stats.json").read_text())
    assert qa["splits"]["valid"]["examples"] == VALID_EXAMPLES and qa["splits"]["train"]["dropped"] == 0
    assert qa["splits"]["valid"]["tokens"]["p50"] > 3 * 128  # contexts need several windows of the tiny model
