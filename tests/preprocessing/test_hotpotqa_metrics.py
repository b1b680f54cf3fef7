"""HotpotQA's official metrics (hotpot_evaluate_v1.py's definitions) against values worked out by
hand for each case."""
import pytest

from longformer_preprocessing.evaluation.hotpotqa import (
    Scores, answer_scores, example_scores, joint_scores, supporting_scores,
)


def close(got: Scores, want) -> None:
    assert tuple(got) == pytest.approx(want, abs=1e-12)


def test_answer_normalization_case_punctuation_articles_whitespace():
    close(answer_scores("The  Eiffel-Tower!", "eiffeltower"), (1, 1, 1, 1))  # '-' removed, not spaced
    close(answer_scores("an apple a day", "Apple   day."), (1, 1, 1, 1))


def test_answer_f1_over_normalized_words():
    # "paris france" vs "paris": 1 common word; precision 1/2, recall 1/1, F1 2 * 1/2 / (3/2) = 2/3
    close(answer_scores("Paris, France", "the Paris"), (0, 2 / 3, 1 / 2, 1))
    # a repeated word counts as often as both sides have it: "x b b" and "b b c" share 2 words;
    # precision 2/3, recall 2/3, F1 2/3
    close(answer_scores("x b b", "b b c"), (0, 2 / 3, 2 / 3, 2 / 3))
    close(answer_scores("Oulu", "Tenby"), (0, 0, 0, 0))


def test_yes_no_answers_are_all_or_nothing():
    close(answer_scores("yes", "no"), (0, 0, 0, 0))
    close(answer_scores("Yes.", "yes"), (1, 1, 1, 1))
    # without the special case "no" vs "no way" would score F1 2/3 (precision 1, recall 1/2)
    close(answer_scores("no", "no way"), (0, 0, 0, 0))
    close(answer_scores("no way", "no"), (0, 0, 0, 0))
    close(answer_scores("noanswer", "the noanswer"), (1, 1, 1, 1))


def test_supporting_facts_as_title_sentence_sets():
    gold = [["Alice Marsh", 1], ["Night Market", 0]]  # as the JSON gives them: lists
    # 2 right, 1 extra: precision 2/3, recall 2/2, F1 2 * 2/3 / (5/3) = 4/5
    close(supporting_scores([("Alice Marsh", 1), ("Night Market", 0), ("Oulu", 0)], gold), (0, 0.8, 2 / 3, 1))
    # 1 of 2, nothing extra, a duplicate counted once: precision 1, recall 1/2, F1 2/3
    close(supporting_scores([("Alice Marsh", 1), ["Alice Marsh", 1]], gold), (0, 2 / 3, 1, 1 / 2))
    close(supporting_scores([("Night Market", 0), ("Alice Marsh", 1)], gold), (1, 1, 1, 1))
    close(supporting_scores([("Alice Marsh", 0)], gold), (0, 0, 0, 0))  # another sentence of the title
    close(supporting_scores([], gold), (0, 0, 0, 0))
    close(supporting_scores([], []), (1, 0, 0, 0))  # the official script: EM 1 with no facts at all


def test_joint_multiplies_precisions_and_recalls():
    answer = Scores(0, 2 / 3, 1 / 2, 1)
    supporting = Scores(0, 0.8, 2 / 3, 1)
    # precision 1/2 * 2/3 = 1/3, recall 1 * 1 = 1, F1 2 * 1/3 / (4/3) = 1/2
    close(joint_scores(answer, supporting), (0, 0.5, 1 / 3, 1))
    close(joint_scores(Scores(1, 1, 1, 1), Scores(1, 1, 1, 1)), (1, 1, 1, 1))
    close(joint_scores(Scores(1, 1, 1, 1), Scores(0, 0, 0, 0)), (0, 0, 0, 0))


def test_one_example_end_to_end():
    answer, supporting, joint = example_scores("Paris, France", "Paris", [("A", 0), ("B", 2)], [("A", 0), ("B", 1)])
    close(answer, (0, 2 / 3, 1 / 2, 1))
    close(supporting, (0, 1 / 2, 1 / 2, 1 / 2))
    # precision 1/2 * 1/2 = 1/4, recall 1 * 1/2 = 1/2, F1 2 * 1/8 / (3/4) = 1/3
    close(joint, (0, 1 / 3, 1 / 4, 1 / 2))
