"""HotpotQA's validation is scored over every question of the published file: a question the
reader dropped (here: stage one's selection removed its answer's paragraph) scores 0, so the
reported F1 is the examples' mean lowered by exactly the dropped questions' share."""
import json

import pytest
import torch
from fairseq.logging import metrics

from tests.support.finetune_data import prepare
from tests.support.finetune_models import task_and_model
from tests.support.hotpotqa_data import MAX_INPUT_TOKENS, hotpotqa_data, write_sample  # noqa: F401  (fixture)

from fairseq_longformer.cli.hotpotqa_selection import shorten
from fairseq_longformer.criterions.hotpotqa_decoding import decode, span_log_probs
from fairseq_longformer.criterions.longformer_hotpotqa import LongformerHotpotQACriterion
from longformer_preprocessing.evaluation.hotpotqa import example_scores


@pytest.fixture(scope="module")
def stage_two_data(hotpotqa_data, tmp_path_factory):  # noqa: F811
    """The fixture's dev file with one span question's answer paragraphs cut away (as a
    selection keeping the wrong paragraphs does), prepared with stage one's tokenizer."""
    raw = tmp_path_factory.mktemp("hotpotqa_selected")
    train, dev = write_sample(raw)
    records = json.loads(dev.read_text())
    victim = next(i for i, r in enumerate(records) if r.get("answer") not in ("yes", "no", "Atlantis"))
    answer = records[victim]["answer"]
    kept = [p for p, (_, sentences) in enumerate(records[victim]["context"]) if not any(answer in s for s in sentences)]
    records[victim] = shorten(records[victim], kept)
    selected = raw / "selected_dev.json"
    selected.write_text(json.dumps(records))
    out = tmp_path_factory.mktemp("hotpotqa_stage2") / "data"
    done = prepare("hotpotqa", out, train, selected, "--sentencepiece-model", str(hotpotqa_data / "spm.model"),
                   "--srcdict", str(hotpotqa_data / "dict.txt"), "--max-input-tokens", str(MAX_INPUT_TOKENS))
    assert done.returncode == 0, done.stderr
    return out, len(records)


def validate(data):
    """(the reported metrics of one validation pass, per example its answer, supporting-fact and
    joint F1 computed from the model's predictions outside the criterion)."""
    task, model, _ = task_and_model(data, "longformer_hotpotqa")
    criterion = LongformerHotpotQACriterion(task)
    dataset = task.load_dataset("valid")
    examples = []
    with metrics.aggregate(new_root=True) as meters, torch.no_grad():
        for start in range(0, len(dataset), 3):  # three batches, as fairseq reduces them one by one
            sample = dataset.collater([dataset[i] for i in range(start, min(start + 3, len(dataset)))])
            _, _, logging_output = criterion(model, sample)
            criterion.reduce_metrics([logging_output])
            out, _ = model(**sample["net_input"], span_head_name=task.cfg.hotpotqa_head_name)
            start_lp, end_lp = span_log_probs(out["span"], sample["context_token"])
            for (answer, facts), record in zip(decode(sample, out, start_lp, end_lp, 30, "two_paragraphs"),
                                               sample["records"]):
                scores = example_scores(answer, record["answer"], facts, record["supporting"])
                examples.append(tuple(s.f1 for s in scores))  # answer, sp, joint
    return meters.get_smoothed_values(), examples


def test_f1_over_every_question_counts_the_dropped_ones_as_zero(stage_two_data):
    data, questions = stage_two_data
    values, examples = validate(data)
    # the dev file: 10 questions; the reader drops its malformed one and the one whose answer was cut
    assert (questions, len(examples)) == (10, 8)
    assert (values["questions"], values["unscored"]) == (10, 2)
    for name, column in (("f1", 0), ("sp_f1", 1), ("joint_f1", 2)):
        mean_over_examples = 100 * sum(e[column] for e in examples) / len(examples)
        assert values[name] == pytest.approx(round(mean_over_examples * len(examples) / questions, 2), abs=0.006)
    assert any(e[1] > 0 for e in examples), "an untrained model that scores nothing checks no denominator"


def test_a_folder_without_its_question_count_is_refused(stage_two_data, tmp_path):
    data, _ = stage_two_data
    stats = json.loads((data / "stats.json").read_text())
    stats["splits"]["valid"]["examples"] += 1
    copy = tmp_path / "data"
    copy.mkdir()
    for path in data.iterdir():
        (copy / path.name).symlink_to(path)
    (copy / "stats.json").unlink()
    (copy / "stats.json").write_text(json.dumps(stats))
    task, _, _ = task_and_model(copy, "longformer_hotpotqa")
    with pytest.raises(ValueError, match="prepare the folder again"):
        task.load_dataset("valid")
