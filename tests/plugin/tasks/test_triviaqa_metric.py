"""TriviaQA's answer metric (its triviaqa_evaluation.py) on hand-worked cases: the normalization
(punctuation and underscores become spaces, unlike SQuAD's, which deletes punctuation), EM and
F1 as the maximum over the normalized aliases, and the criterion choosing it per record."""
import math

import torch

from fairseq_longformer.criterions.longformer_qa import LongformerQACriterion
from longformer_preprocessing.evaluation.answers import exact_match, f1_score
from longformer_preprocessing.evaluation.answers import triviaqa_normalize as normalize_answer

TRIVIA = normalize_answer


def test_normalization_by_hand():
    assert normalize_answer("The Beatles!") == "beatles"
    assert normalize_answer("U.S._Army") == "u s army"  # SQuAD's would give "usarmy"
    assert normalize_answer("  A  tale of\ttwo cities ") == "tale of two cities"
    assert normalize_answer("Cain\u2019s `brother\u00b4") == "cain s brother"
    assert normalize_answer("theatre an") == "theatre"  # whole words only


def test_em_and_f1_by_hand():
    assert exact_match("the U.S.", "u s", TRIVIA) == 1.0
    assert exact_match("the U.S.", "u s") == 0.0  # SQuAD: "us" against "u s"
    # "cain s brother abel" against "abel": precision 1/4, recall 1, F1 = 2 * 0.25 / 1.25 = 0.4
    assert math.isclose(f1_score("Cain's brother Abel", "abel", TRIVIA), 0.4)
    # SQuAD deletes the apostrophe: "cains brother abel", 1/3 precision: F1 0.5
    assert math.isclose(f1_score("Cain's brother Abel", "abel"), 0.5)
    assert f1_score("Noah", "abel", TRIVIA) == 0.0


def test_criterion_takes_the_best_alias_with_the_records_normalization():
    criterion = LongformerQACriterion.__new__(LongformerQACriterion)
    criterion.max_answer = 3
    context = "It was Abel (Bible) himself"
    chars = [[0, 2], [3, 6], [7, 11], [12, 19], [20, 27]]
    start, end = torch.full((1, 7), -9.0), torch.full((1, 7), -9.0)
    start[0, 4], end[0, 5] = -0.1, -0.1  # prefix 2: context tokens 2..3 = "Abel (Bible)"
    sample = {"window_prefix": torch.tensor([2]), "window_offset": torch.tensor([0]),
              "window_length": torch.tensor([5]), "window_example": torch.tensor([0]),
              "records": [{"context": context, "token_chars": chars, "answers": ["abel", "abel bible"],
                           "normalization": "triviaqa"}]}
    assert criterion.score(sample, start, end) == (1.0, 1.0)  # "abel bible", exactly
    sample["records"][0]["answers"] = ["abel", "bible abel"]
    em, f1 = criterion.score(sample, start, end)
    assert em == 0.0 and math.isclose(f1, 1.0)  # same words, another order: F1 1, EM 0
    sample["records"][0]["answers"] = ["abel"]
    assert math.isclose(criterion.score(sample, start, end)[1], 2 * 0.5 / 1.5)  # P 1/2, R 1


def test_one_question_over_its_pages_scores_the_best_window_of_any_page():
    from fairseq_longformer.tasks.longformer_qa import group_by_question

    records = [{"question_id": "q1"}, {"question_id": "q2"}, {"question_id": "q1"}, {}]
    assert group_by_question(records) == [[0, 2], [1], [3]]
    criterion = LongformerQACriterion.__new__(LongformerQACriterion)
    criterion.max_answer = 2
    pages = [{"context": "Noah built", "token_chars": [[0, 4], [5, 10]], "spans": []},
             {"context": "Abel kept sheep", "token_chars": [[0, 4], [5, 9], [10, 15]], "spans": [[0, 0]]}]
    start, end = torch.full((2, 6), -9.0), torch.full((2, 6), -9.0)
    start[0, 2] = end[0, 2] = -2.0  # page 1: "Noah", score -4
    start[1, 2] = end[1, 2] = -1.0  # page 2: "Abel", score -2: the question's answer
    sample = {"window_prefix": torch.tensor([2, 2]), "window_offset": torch.tensor([0, 0]),
              "window_length": torch.tensor([2, 3]), "window_example": torch.tensor([0, 0]),
              "records": [{**pages[0], "answers": ["abel"], "normalization": "triviaqa"}],
              "window_records": pages}
    assert criterion.score(sample, start, end) == (1.0, 1.0)
