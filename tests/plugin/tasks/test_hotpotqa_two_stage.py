"""HotpotQA's two stages, in process: the evidence decoder constrained to exactly two paragraphs
(against an exhaustive search over pairs, and a hand-checked case), the paragraph-selection rule,
the selected record's form and the selection report's recall (hand-checked), and
longformer-select-paragraphs' bad input. The end-to-end run (stage one, selection, stage two,
evaluation through the console scripts and fairseq-train) is the recipe's CPU smoke run in
tests/recipes/test_dataset_recipes.py."""
import itertools
import random

import pytest

from fairseq_longformer.cli.select_paragraphs import main as select_main
from fairseq_longformer.criterions.hotpotqa_decoding import threshold_evidence, two_paragraph_evidence
from fairseq_longformer.cli.hotpotqa_selection import SelectionReport, keep_paragraphs, shorten


def test_constrained_decoder_picks_the_right_pair_on_a_hand_checked_case():
    # paragraphs 0..3; sentences: p0 two, p1 one, p2 two, p3 one
    owner = [0, 0, 1, 2, 2, 3]
    paragraph = [2.0, -1.0, 0.5, 3.0]
    sentence = [1.5, -0.5, 4.0, 0.2, -2.0, -3.0]
    # pair scores: p0 2.0+1.5=3.5, p1 -1+4=3.0, p2 0.5+0.2=0.7, p3 3-3=0.0 -> pair (p0, p1)
    assert two_paragraph_evidence(paragraph, sentence, owner) == [0, 2]  # p0's sentence 0 and p1's only one
    # unconstrained: every sentence above 0 -> three paragraphs (p0, p1, p2)
    assert threshold_evidence(sentence) == [0, 2, 3]
    # no sentence of the pair above 0: each paragraph still gives its best sentence
    assert two_paragraph_evidence([5.0, 5.0, 0.0], [-1.0, -0.5, -4.0, 0.3], [0, 0, 1, 2]) == [1, 2]


def test_constrained_decoder_always_uses_exactly_two_paragraphs_when_two_can_be_chosen():
    rng = random.Random(0)
    for _ in range(300):
        paragraphs = rng.randint(2, 10)
        owner = sorted(rng.randrange(paragraphs) for _ in range(rng.randint(2, 30)))
        if len(set(owner)) < 2:
            owner[-1] = (owner[0] + 1) % paragraphs
        p_scores = [rng.gauss(0, 3) for _ in range(paragraphs)]
        s_scores = [rng.gauss(0, 3) for _ in owner]
        chosen = two_paragraph_evidence(p_scores, s_scores, owner)
        used = {owner[k] for k in chosen}
        assert len(used) == 2
        # the pair: the best of every pair of paragraphs holding sentences (exhaustive search)
        best = {p: max(s for s, q in zip(s_scores, owner) if q == p) for p in set(owner)}
        want = max(itertools.combinations(sorted(best), 2),
                   key=lambda ij: sum(p_scores[p] + best[p] for p in ij))
        assert used == set(want)
        for p in used:  # every sentence of the pair above 0, else its best one
            mine = [k for k, q in enumerate(owner) if q == p]
            above = [k for k in mine if s_scores[k] > 0]
            assert [k for k in chosen if owner[k] == p] == (above or [max(mine, key=s_scores.__getitem__)])
    assert two_paragraph_evidence([1.0], [-1.0, 2.0], [0, 0]) == [1]  # one paragraph: what it has


def test_keep_paragraphs_threshold_cap_original_order_and_fallback():
    scores = [-3.5, 2.0, -2.9, 0.1, 5.0, -3.0, 1.0, 4.0]
    assert keep_paragraphs(scores, -3.0, 5) == [1, 3, 4, 6, 7]  # the 5 best above -3.0 (not -2.9), in order
    assert keep_paragraphs(scores, -3.0, 10) == [1, 2, 3, 4, 6, 7]  # -3.0 itself is not above
    assert keep_paragraphs([-9.0, -4.0, -7.0], -3.0, 5) == [1]  # none passes: the best one stays
    assert keep_paragraphs([], -3.0, 5) == []


def _record(gold, titles):
    return {"_id": "q", "question": "?", "answer": "x", "type": "bridge",
            "supporting_facts": [[t, 0] for t in gold], "context": [[t, [f"{t} x."]] for t in titles]}


def test_shortened_record_and_report_recall_on_a_hand_checked_case():
    one = _record(["A", "B"], ["A", "C", "B", "D"])
    two = _record(["E", "F"], ["E", "G", "F"])
    short = shorten(one, [0, 1])
    assert [c[0] for c in short["context"]] == ["A", "C"]
    assert short["supporting_facts"] == [["A", 0]] and short["supporting_facts_removed"] == [["B", 0]]
    report = SelectionReport(questions=3)  # the third question was not scored (the reader dropped it)
    side = {"answer": "x", "supporting": [["A", 0], ["B", 0]]}
    report.add(one, [0, 1], {"two_paragraphs": ("x", [("A", 0), ("C", 0)])}, side)
    report.add(two, [0, 2], {"two_paragraphs": ("y", [("E", 0), ("F", 0)])}, {**side, "supporting": [["E", 0], ["F", 0]]})
    s = report.summary(-3.0, 5, "cpu")
    # gold paragraphs: A, B, E, F; kept: A, E, F -> 3 / 4; all gold kept in one question of two
    assert (s["gold_paragraph_recall"], s["questions_with_all_gold_kept"]) == (75.0, 50.0)
    assert s["paragraphs_kept"] == {"mean": 2.0, "histogram": {2: 2}} and s["passed_unchanged"] == 1
    # question one: answer right, sp P = R = 1/2; question two: answer wrong, sp exact
    over_scored = s["scores_over_scored"]["two_paragraphs"]
    assert over_scored["em"] == 50.0 and over_scored["sp_f1"] == 75.0 and over_scored["joint_f1"] == 25.0
    # over the file's three questions, the unscored one counting 0: two thirds of each
    assert s["scores"]["two_paragraphs"] == {"em": 33.33, "f1": 33.33, "sp_em": 33.33, "sp_f1": 50.0,
                                             "joint_em": 0.0, "joint_f1": 16.67}
    # selecting a shortened record again counts the gold removed before as missed
    again = SelectionReport(1)
    again.add(short, [0, 1], {}, side)
    assert again.summary(-3.0, 5, "cpu")["gold_paragraph_recall"] == 50.0


@pytest.mark.parametrize("args, says", [
    (["--split", "valid"], "is not SPLIT=FILE"),
    (["--split", "valid=/nonexistent.json"], "is not a file"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, says):
    (tmp_path / "model.pt").write_bytes(b"")
    code = select_main(["--checkpoint", str(tmp_path / "model.pt"), "--data", str(tmp_path),
                        "--destdir", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_output_over_an_input_is_refused(tmp_path, capsys):
    (tmp_path / "model.pt").write_bytes(b"")
    (tmp_path / "valid.json").write_text("[]")
    (tmp_path / "valid.hotpot.jsonl").write_text("")
    code = select_main(["--checkpoint", str(tmp_path / "model.pt"), "--data", str(tmp_path),
                        "--split", f"valid={tmp_path / 'valid.json'}", "--destdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "would replace the input" in err and (tmp_path / "valid.json").read_text() == "[]"


def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys):
    (tmp_path / "model.pt").write_bytes(b"")
    (tmp_path / "valid.json").write_text("[]")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "valid.hotpot.jsonl").write_text("")
    code = select_main(["--checkpoint", str(tmp_path / "model.pt"), "--data", str(tmp_path / "data"),
                        "--split", f"valid={tmp_path / 'valid.json'}", "--destdir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a complete fairseq checkpoint" in err
    assert not (tmp_path / "out").exists()
