"""HotpotQA: longformer-prepare-task on a schema-exact sample (malformed records counted per reason,
supporting facts cut by --max-input-tokens counted), the task's input layout, token classes and
global pattern, the gold targets, the head's shapes, the grown vocabulary on loading a smaller
checkpoint, and a fairseq-train run that trains and evaluates with the official metrics logged."""
import json
import re

import pytest
import torch

from tests.support.finetune_data import TINY_FINETUNE_ARGS, prepare
from tests.support.finetune_models import batch, task_and_model
from tests.support.hotpotqa_data import BAD, MAX_INPUT_TOKENS, hotpotqa_data  # noqa: F401  (fixture)
from tests.support.device import fp32_or_bf16_flag
from tests.support.training import FAIRSEQ_TRAIN, run_logged, train_inner

from fairseq_longformer.models.heads import LongformerHotpotQAHead
from fairseq_longformer.tasks.token_classes import CLS, QUESTION, SENTENCE, TITLE
from longformer_preprocessing.evaluation.answers import squad_normalize as normalize_answer

METRICS = ("em", "f1", "sp_em", "sp_f1", "joint_em", "joint_f1")


def _records(data, split):
    return [json.loads(line) for line in (data / f"{split}.hotpot.jsonl").read_text().splitlines()]


def test_prepare_counts_malformed_records_and_cut_supporting_facts(hotpotqa_data):
    stats = json.loads((hotpotqa_data / "stats.json").read_text())
    train, valid = stats["splits"]["train"], stats["splits"]["valid"]
    assert (train["examples"], train["dropped_by_reason"]) == (24, BAD)
    assert (valid["examples"], valid["dropped_by_reason"]) == (9, {"answer not found in the context": 1})
    printed = (hotpotqa_data.parent / "prepare.out").read_text()
    for split, s in stats["splits"].items():
        records = _records(hotpotqa_data, split)
        cut = sum(len(r["supporting"]) - len(r["support_sentences"]) for r in records)
        assert s["truncated"]["supporting facts cut by --max-input-tokens"] == cut
        assert f"{split}: {cut} supporting facts cut by --max-input-tokens" in printed
        assert s["tokens_written"]["max"] <= MAX_INPUT_TOKENS
    assert stats["splits"]["train"]["truncated"]["supporting facts cut by --max-input-tokens"] > 0
    assert stats["splits"]["train"]["tokens"]["max"] > MAX_INPUT_TOKENS  # the sample has inputs to cut
    for reason, n in BAD.items():
        assert f"train: {n} dropped: {reason}" in printed


def test_input_layout_token_classes_and_global_pattern(hotpotqa_data):
    task, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    d = task.source_dictionary
    dataset = task.load_dataset("valid")
    item, record = dataset[0], dataset.records[0]
    tokens, classes = item["tokens"], item["classes"]
    question = dataset.questions[0].tolist()
    assert tokens[:len(question) + 4].tolist() == [d.bos(), d.index("[q]"), *question, d.index("[/q]"), d.index("<t>")]
    assert tokens[-1] == d.eos() and tokens[-2] == d.index("[s]")
    assert tokens[item["titles"]].eq(d.index("<t>")).all() and len(item["titles"]) == len(record["paragraphs"])
    assert tokens[item["sentences"]].eq(d.index("[s]")).all()
    assert len(item["sentences"]) == sum(n for _, n in record["paragraphs"]) == int(tokens.eq(d.index("[s]")).sum())
    assert classes[0] == CLS and classes[1:len(question) + 3].eq(QUESTION).all()
    assert classes.eq(SENTENCE).nonzero().flatten().tolist() == item["sentences"]
    assert classes.eq(TITLE).sum() == sum(len(t) + 2 for t in (dataset.titles[i] for i in range(len(item["titles"]))))
    mask = batch(task, "valid", [0])["net_input"]["global_attention_mask"][0]
    want = (classes == QUESTION) | (classes == TITLE) | (classes == SENTENCE)
    assert torch.equal(mask[:len(tokens)], want) and not mask[0]  # not <s>
    assert [d.index(m) for m in ("[q]", "[/q]", "<t>", "</t>", "[s]")] == list(range(d.index("<mask>") + 1, len(d)))
    none, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa", "--global-attention", "none",
                                "--global-classes", "question,title,sentence,cls")
    none.load_dataset("valid")
    assert "global_attention_mask" not in batch(none, "valid", [0, 1])["net_input"]


def test_gold_targets_point_at_the_answer_and_the_supporting_markers(hotpotqa_data):
    task, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    dataset = task.load_dataset("valid")
    sample = batch(task, "valid", list(range(len(dataset))))
    spans = 0
    for row, record in enumerate(sample["records"]):
        chars, token = record["token_chars"], sample["context_token"][row]
        starts, ends = sample["start_gold"][row].nonzero().flatten(), sample["end_gold"][row].nonzero().flatten()
        for start, end in zip(starts, ends):
            s, e = int(token[start]), int(token[end])
            # characters of whole words: "Grasse." for the answer "Grasse", alike once normalized
            assert normalize_answer(record["text"][chars[s][0]:chars[e][1]]) == normalize_answer(record["answer"])
            spans += 1
        assert bool(sample["has_span"][row]) == bool(record["spans"])
        assert sample["type_target"][row] == {"yes": 1, "no": 2}.get(record["answer"], 0)
        assert sample["sentence_target"][row].sum() == len(record["support_sentences"])
        assert sample["paragraph_target"][row].sum() == len(record["support_paragraphs"])
        assert not (sample["sentence_target"][row].bool() & ~sample["sentence_valid"][row]).any()
    assert spans > 0 and (sample["type_target"] > 0).any()


def test_paragraph_score_token_title_reads_each_paragraph_at_its_titles_first_token(hotpotqa_data):
    """A from-scratch encoder's global <t> has no view of its own title (the same query for every
    paragraph): ``--paragraph-score-token title`` reads the score at the title's first token, the
    same paragraphs and targets as at the markers."""
    marker, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    title, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa", "--paragraph-score-token", "title")
    d = title.source_dictionary
    indices = list(range(len(title.load_dataset("valid"))))
    at_marker, at_title = batch(marker, "valid", indices), batch(title, "valid", indices)
    dataset = title.datasets["valid"]
    valid = at_title["paragraph_valid"]
    assert torch.equal(valid, at_marker["paragraph_valid"])
    assert torch.equal(at_title["paragraph_target"], at_marker["paragraph_target"])
    assert torch.equal(at_title["paragraph_positions"][valid], at_marker["paragraph_positions"][valid] + 1)
    for row, i in enumerate(at_title["id"].tolist()):
        tokens = at_title["net_input"]["src_tokens"][row]
        first = dataset.first_title[i]
        want = [int(dataset.titles[first + p][0]) for p in range(len(dataset.records[i]["paragraphs"]))]
        assert tokens[at_title["paragraph_positions"][row][valid[row]]].tolist() == want
        assert d.index("<t>") not in want


def test_head_shapes(hotpotqa_data):
    head = LongformerHotpotQAHead(16)
    out = head(torch.randn(3, 11, 16))
    assert {k: tuple(v.shape) for k, v in out.items()} == {"span": (3, 11, 2), "type": (3, 3), "paragraph": (3, 11),
                                                          "sentence": (3, 11)}
    task, model, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    task.load_dataset("valid")
    sample = batch(task, "valid", [0, 1])
    with torch.no_grad():
        out, _ = model(**sample["net_input"], span_head_name="hotpotqa")
    b, n = sample["net_input"]["src_tokens"].shape
    assert out["span"].shape == (b, n, 2) and out["type"].shape == (b, 3)
    assert out["paragraph"].shape == out["sentence"].shape == (b, n)


def test_data_prepared_for_longer_inputs_than_the_model_is_refused(hotpotqa_data):
    task, _, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa", "--max-positions", "64")
    with pytest.raises(ValueError, match="more than --max-positions 64: prepare the data with --max-input-tokens 64"):
        task.load_dataset("train")


def test_smaller_checkpoint_loads_with_new_marker_rows(hotpotqa_data):
    _, model, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa", seed=1)
    state = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("span_heads.")}
    for key in ("encoder.sentence_encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias"):
        state[key] = state[key][:-5]  # the pretrained checkpoint: no markers, no HotpotQA head
    pretrained = state["encoder.sentence_encoder.embed_tokens.weight"].clone()
    _, fresh, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa", seed=2)
    new_rows = fresh.encoder.sentence_encoder.embed_tokens.weight[-5:].detach().clone()
    fresh.load_state_dict(state, strict=True, model_cfg=None)
    embed = fresh.encoder.sentence_encoder.embed_tokens.weight.detach()
    torch.testing.assert_close(embed[:-5], pretrained)
    torch.testing.assert_close(embed[-5:], new_rows)


@pytest.mark.device
def test_hotpotqa_trains_and_evaluates_with_the_official_metrics(hotpotqa_data, tmp_path):
    text = run_logged([FAIRSEQ_TRAIN, hotpotqa_data, *TINY_FINETUNE_ARGS, "--task", "longformer_hotpotqa",
                       "--criterion", "longformer_hotpotqa", "--batch-size", "4", "--max-epoch", "2",
                       "--optimizer", "adam", "--lr", "1e-3", "--dropout", "0", "--seed", "3", *fp32_or_bf16_flag(),
                       "--num-workers", "0", "--log-format", "simple", "--log-interval", "1",
                       "--sentence-loss-weight", "2", "--no-epoch-checkpoints", "--save-dir", tmp_path / "save"],
                      tmp_path / "train.log", timeout=240)
    assert len(train_inner(text)) == 12  # 24 examples, batch 4, 2 epochs
    lines = [line for line in text.splitlines() if "valid on 'valid' subset" in line]
    valid = {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}
    assert all(0 <= valid[m] <= 100 for m in METRICS) and valid["loss"] > 0, lines[-1]
    for name in ("em", "sp_em", "joint_em"):
        count = valid[name] / 100 * 10  # a whole number of the dev file's 10 questions (its bad one scores 0)
        assert abs(count - round(count)) < 0.01, (name, valid[name])
    assert valid["joint_em"] <= min(valid["em"], valid["sp_em"]) and (valid["questions"], valid["unscored"]) == (10, 1)
    assert (tmp_path / "save" / "checkpoint_last.pt").is_file()


def test_a_file_that_is_not_hotpotqa_is_one_error_line_and_writes_nothing(tmp_path):
    (tmp_path / "train.json").write_text("not json")
    (tmp_path / "dev.json").write_text(json.dumps({"_id": "a dict, not a list"}))
    for train in ("train.json", "dev.json"):
        done = prepare("hotpotqa", tmp_path / "out", tmp_path / train, tmp_path / "dev.json",
                       "--train-sentencepiece", "320")
        assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
        assert not (tmp_path / "out").exists()
