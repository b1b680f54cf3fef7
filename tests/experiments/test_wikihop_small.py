"""longformer_experiments.wikihop_small: its records are WikiHop records whose answer is the one
candidate named in the supports, and the experiment runs end to end (data, three rows through
fairseq-train, the Table 10 table) in a tiny configuration."""
import json
import random

import pytest

from longformer_experiments.global_ablation import needles
from longformer_experiments.wikihop_small import main as experiment
from longformer_preprocessing.tasks.wikihop import example_of
from tests.conftest import KJV


@pytest.fixture(scope="module")
def pools():
    return needles.corpus_pools(KJV, needles.NAMES, seed=1)


def test_answer_is_the_only_candidate_named_in_the_supports(pools):
    rng = random.Random(2)
    examples = needles.build_examples(pools["valid"], 12, 120, 32, 2, rng)
    records = experiment.wikihop_records(examples, 3, rng, "valid")
    assert len({tuple(r["candidates"]) for r in records}) > 1  # candidate sets and orders vary
    for record in records:
        parsed = example_of(record)  # the WikiHop reader takes it as it is
        assert len(parsed.candidates) == 3 and parsed.candidates[parsed.answer] == record["answer"]
        named = needles.names_in(" ".join(record["supports"]), parsed.candidates)
        assert named == {record["answer"]}


def test_tiny_run_writes_the_table_with_every_row(tmp_path):
    argv = ["--out", str(tmp_path), "--seeds", "1", "--updates", "2", "--batch-size", "4", "--dim", "32",
            "--heads", "2", "--train-examples", "16", "--valid-examples", "8", "--doc-words", "40", "--needles", "1",
            "--vocab", "400", "--long", "384"]
    assert experiment.main(argv) == 0
    table = json.loads((tmp_path / "table.json").read_text())["table"]
    assert list(table) == list(experiment.ROWS)
    for row in table.values():  # a whole number of the 8 valid questions
        assert abs(row["mean"] / 100 * 8 - round(row["mean"] / 100 * 8)) < 0.01
    text = (tmp_path / "table.md").read_text()
    assert "| no global |" in text and "global above no global" in text and "Regenerate: `python -m" in text
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(logs) == 3
