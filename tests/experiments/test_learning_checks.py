"""experiments/learning_checks: each check's pipeline end to end at its tiny budget (a few updates:
the pipeline runs, no learning is expected), the pass/fail logic (a missed criterion exits 1, a
page states its criterion before its numbers), the curve read back from fairseq's log, and the
controls' arithmetic against hand-made cases."""
import json
import random
import re
import types

import pytest

from longformer_experiments.hotpotqa_small.data import records
from longformer_experiments.learning_checks import common, coref, extractive_qa, hotpotqa, main, page
from longformer_experiments.learning_checks import training
from longformer_experiments.learning_checks.training import LoadSampler, curve
from longformer_experiments.runner import KJV

LOG = """\
2026-11-28 | INFO | train_inner | epoch 001:     25 / 50 loss=26.187, num_updates=25
2026-11-28 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 18.263 | f1 30.92 | num_updates 50
2026-11-28 | INFO | valid | epoch 001 | valid on 'valid_far' subset | loss 1 | f1 99 | num_updates 50
2026-11-28 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 17.392 | f1 38.41 | num_updates 100 | best_loss 17.392
"""


def test_curve_reads_every_validation_of_the_subset_in_order():
    assert curve(LOG, "f1") == [(50, 30.92), (100, 38.41)]
    assert curve(LOG, "f1", "valid_far") == [(50, 99.0)]
    with pytest.raises(RuntimeError, match="no validation em"):
        curve(LOG, "em")


def test_margin_check_passes_at_the_margin_and_not_below():
    assert common.margin_check({"1": 45.0, "2": 55.0}, {"1": 30.0, "2": 30.0}, 20)["passed"]
    missed = common.margin_check({"1": 45.0, "2": 54.0}, {"1": 30.0, "2": 30.0}, 20)
    assert not missed["passed"] and "LESS than the 20" in missed["criterion_check"]


def result(passed, load_max=1.0, rows=None):
    rows = rows or [common.row("model", "model", {1: 80.0, 2: 90.0}), common.row("chance", "baseline", {1: 25, 2: 25})]
    made = common.result("learning_fake", "Fake", "About it.", "at least 20 points above chance", "accuracy (%)", rows,
                         {"seed 1": [[1, 30.0], [2, 80.0]]}, {"updates": 2}, [1, 2],
                         {"passed": passed, "criterion_check": "said"} if passed is not None else {"passed": None})
    made.update({"load": {"max": load_max, "mean": load_max, "samples": 3}, "provenance": None, "seconds": 3,
                 "argv": ["--only", "fake"]})
    return made


def test_page_states_the_criterion_before_the_numbers_and_draws_the_curve(tmp_path):
    text = page.write(result(True), tmp_path).read_text()
    assert text.index("**Pass criterion**") < text.index("| model |") < text.index("**Result: PASSED**")
    assert "Busy machine" not in text and (tmp_path / "learning_fake.png").stat().st_size > 1000
    assert "![learning curve](learning_fake.png)" in text
    assert json.loads((tmp_path / "learning_fake.json").read_text())["passed"] is True
    assert "85.00 ± 5.00" in text  # mean ± half the range
    assert page.render(json.loads((tmp_path / "learning_fake.json").read_text())) == text  # results_pages' way


def test_a_page_whose_training_saw_a_busy_machine_says_so_at_the_top(tmp_path):
    text = page.write(result(False, load_max=7.5), tmp_path).read_text()
    assert text.splitlines()[2].startswith("> **Busy machine:** the load average reached 7.5")
    assert "**Result: MISSED**" in text


def test_an_ordering_inside_the_spread_is_undetermined_never_reversed():
    high = common.row("a", "row", {1: 50.0, 2: 60.0})
    assert page.ordering(common.row("a", "row", {1: 90.0}), common.row("b", "row", {1: 10.0})) == "undetermined"
    assert page.ordering(high, common.row("b", "row", {1: 40.0, 2: 45.0})) == "holds"
    assert page.ordering(high, common.row("b", "row", {1: 55.0, 2: 58.0})) == "undetermined"
    assert page.ordering(high, common.row("b", "row", {1: 61.0, 2: 70.0})) == "reversed"


def fake_check(passed):
    return types.SimpleNamespace(run=lambda work, budget, seeds: result(passed))


@pytest.mark.parametrize("passed, status", [(True, 0), (False, 1), (None, 0)])
def test_the_command_exits_1_when_a_check_misses_its_criterion(tmp_path, monkeypatch, passed, status):
    monkeypatch.setitem(main.ALL, "fake", "fake")
    monkeypatch.setitem(main.DEFAULT_SEEDS, "fake", [1])
    monkeypatch.setattr(main.importlib, "import_module", lambda name: fake_check(passed))
    assert main.main(["--only", "fake", "--out", str(tmp_path)]) == status
    assert (tmp_path / "pages" / "learning_fake.md").is_file()


def test_sampler_records_the_load_while_its_block_runs():
    with LoadSampler(every=0.01) as load:
        pass
    summary = load.summary()
    assert summary["samples"] >= 1 and summary["max"] >= summary["mean"] >= 0


def pattern(template: str) -> str:
    """A regular expression matching ``template`` with a word in each ``{}`` (the groups)."""
    return re.escape(template).replace(re.escape("{}"), r"(\w+)")


def test_qa_examples_point_at_their_answer():
    rng = random.Random(3)
    hay = [["In the beginning God created the heaven and the earth.", "And the earth was without form."]]
    for _ in range(20):
        e = extractive_qa.example(rng, hay, 12)
        answer = e["answers"][0]
        assert e["context"][answer["start"]:answer["start"] + len(answer["text"])] == answer["text"]
        asked = [(fact, q) for fact, q in extractive_qa.RELATIONS if re.fullmatch(pattern(q), e["question"])]
        assert len(asked) == 1  # the question names one relation, and its person
        person = re.fullmatch(pattern(asked[0][1]), e["question"]).group(1)
        fact = asked[0][0].format(person, answer["text"])
        assert e["context"].index(fact) + len(fact) - len(answer["text"]) - 1 == answer["start"]
        # one fact per relation, three different people and towns: a random town is right 1 in 3
        towns = [re.search(pattern(f), e["context"]).group(2) for f, _ in extractive_qa.RELATIONS]
        assert len(set(towns)) == extractive_qa.FACTS and answer["text"] in towns


def test_random_town_f1_is_one_over_the_towns_of_the_context():
    record = {"answer": "Bethel", "context": [["A", ["x.", " A dwelt in Bethel."]], ["B", ["y.", " B dwelt in Zoar."]],
                                             ["C", ["z.", " C was the brother of A."]]]}
    lost = {**record, "context": record["context"][1:]}
    assert hotpotqa.random_town_f1([record]) == 50.0
    assert hotpotqa.random_town_f1([record, lost]) == 25.0  # the lost answer scores 0


def test_random_town_f1_counts_the_brothers_own_town_and_is_one_half_on_the_gold_pair():
    """The brother's own town ("A, who dwelt in U, ...", comma and all) is a town of the input: on
    the gold paragraphs a random town is right about half the time, not always (a KJV clause may
    name a third town)."""
    record = {"answer": "Zoar", "context": [["A", ["x.", " A, who dwelt in Bethel, was the brother of B."]],
                                           ["B", ["y.", " B dwelt in Zoar."]]]}
    assert hotpotqa.random_town_f1([record]) == 50.0
    made = records(KJV, 0, {"valid": 200}, 10)["valid"]
    assert 45.0 <= hotpotqa.random_town_f1(hotpotqa.kept_only(made, hotpotqa.gold)) <= 50.0


def test_string_match_links_mentions_that_share_a_word():
    sentences = [["saul", "the", "king", "went", "."], ["the", "king", "slept", ";", "saul", "woke", "."],
                 ["eli", "the", "priest", "sat", "."]]
    entities = {"0": [(0, 2), (5, 6), (9, 9)], "1": [(12, 14)]}
    assert coref.string_match(sentences, entities) == [[(0, 2), (5, 6), (9, 9)], [(12, 14)]]
    docs = {"d_0": (sentences, entities)}
    assert coref.string_match_f1(docs) == 100.0


@pytest.mark.parametrize("name", sorted(main.ALL))
def test_each_check_runs_end_to_end_at_its_tiny_budget(tmp_path, name):
    assert main.main(["--only", name, "--budget", "tiny", "--seeds", "1", "--out", str(tmp_path)]) in (0, 1)
    pages = sorted((tmp_path / "pages").glob("*.md"))
    assert pages
    for path in pages:
        text = path.read_text()
        assert "stated before the numbers" in text and "Regenerate:" in text
        saved = json.loads(path.with_suffix(".json").read_text())
        assert saved["seeds"] == [1] and saved["provenance"]["commit"] and saved["load"]["samples"] >= 1


def test_a_saved_run_starts_from_scratch_not_from_an_earlier_runs_checkpoint(tmp_path, monkeypatch):
    """fairseq-train resumes from the checkpoint_last.pt in its --save-dir: a rerun of a check that
    keeps its checkpoint (HotpotQA's stage one) must not find the earlier run's there."""
    save_dir = tmp_path / "stage1"
    save_dir.mkdir()
    (save_dir / "checkpoint_last.pt").write_bytes(b"an earlier run")
    seen = {}
    monkeypatch.setattr(training, "run", lambda name, cmd, log, threads: seen.update(
        cmd=cmd, left=sorted(p.name for p in save_dir.iterdir())) or "")
    training.fine_tune(tmp_path / "data", "longformer_hotpotqa", tmp_path / "stage1.log", training.Model(),
                       updates=2, batch_size=2, lr=1e-3, seed=1, validate_every=1, save_dir=save_dir)
    assert seen["left"] == []
    assert seen["cmd"][seen["cmd"].index("--save-dir") + 1] == str(save_dir)
