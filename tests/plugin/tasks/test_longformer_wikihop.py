"""WikiHop: the reader on a schema-exact qangaroo sample (malformed records counted per reason),
the task's input layout and token classes, the chunk-averaged candidate scores against the model
run on each chunk alone, the grown vocabulary on loading a smaller checkpoint, and a fairseq-train
run through recipes/finetune_wikihop.sh's CPU=1 smoke run that trains and validates every example."""
import json
import os
import random
import re
from pathlib import Path

import pytest
import torch

from tests.support.finetune_data import prepare
from tests.support.finetune_models import batch, task_and_model
from tests.conftest import REPO
from tests.support.device import device
from tests.support.training import FAIRSEQ_TRAIN, run_logged, subprocess_env, train_inner

from fairseq_longformer.criterions.longformer_wikihop import candidate_logits
from fairseq_longformer.tasks.token_classes import CANDIDATE, CLS, QUESTION

PEOPLE = ["alice marsh", "bern ostrow", "cara lindqvist", "dov halpern", "emil sauer", "fay okafor"]
PLACES = ["lerida", "porto vel", "kasmir", "tenby", "oulu", "grasse", "nidaros", "sabadell"]
FILLER = "the river runs past old walls and the market opens early every day".split()
BAD = {"no answer": 1, "answer not among candidates": 2, "empty supports": 1}


def _record(rng: random.Random, i: int, supports_words: int) -> dict:
    """A qangaroo WikiHop record: the person was born in a town that lies in a country."""
    person, town = rng.choice(PEOPLE), rng.choice(PLACES)
    candidates = rng.sample([p for p in PLACES if p != town], 3) + [town]
    rng.shuffle(candidates)
    filler = " ".join(rng.choice(FILLER) for _ in range(supports_words))
    return {"id": f"WH_train_{i}", "query": f"place_of_birth {person}", "answer": town, "candidates": candidates,
            "supports": [f"{person} was born in {town} . {filler}", f"{town} is a town . {filler}"],
            "annotations": []}


def _split(rng: random.Random, n: int, bad: dict) -> list:
    records = [_record(rng, i, rng.choice([5, 10, 60])) for i in range(n)]
    for _ in range(bad.get("no answer", 0)):
        records.append(dict(_record(rng, len(records), 5), answer=""))
    for _ in range(bad.get("answer not among candidates", 0)):
        records.append(dict(_record(rng, len(records), 5), answer="atlantis"))
    for _ in range(bad.get("empty supports", 0)):
        records.append(dict(_record(rng, len(records), 5), supports=[]))
    return records


@pytest.fixture(scope="module")
def wikihop_data(tmp_path_factory):
    rng = random.Random(0)
    raw = tmp_path_factory.mktemp("wikihop_raw")
    (raw / "train.json").write_text(json.dumps(_split(rng, 32, BAD)))
    (raw / "dev.json").write_text(json.dumps(_split(rng, 10, {"answer not among candidates": 1})))
    out = tmp_path_factory.mktemp("wikihop") / "data"
    done = prepare("wikihop", out, raw / "train.json", raw / "dev.json", "--train-sentencepiece", "320")
    assert done.returncode == 0, done.stderr
    return out


def test_reader_counts_malformed_records_per_reason(wikihop_data):
    stats = json.loads((wikihop_data / "stats.json").read_text())
    assert stats["splits"]["train"]["examples"] == 32
    assert stats["splits"]["train"]["dropped_by_reason"] == BAD
    assert stats["splits"]["valid"]["dropped_by_reason"] == {"answer not among candidates": 1}
    records = [json.loads(line) for line in (wikihop_data / "valid.choices.jsonl").read_text().splitlines()]
    assert len(records) == 10 and all(r["candidates"] == 4 and 0 <= r["answer"] < 4 for r in records)


def test_input_layout_token_classes_and_default_global_pattern(wikihop_data):
    task, _, _ = task_and_model(wikihop_data, "longformer_wikihop")
    d = task.source_dictionary
    dataset = task.load_dataset("valid")
    item = dataset[0]
    tokens, classes = item["chunks"][0]
    question = dataset.questions[0].tolist()
    assert tokens[:len(question) + 3].tolist() == [d.bos(), d.index("[q]"), *question, d.index("[/q]")]
    assert tokens[item["candidates"]].eq(d.index("[ent]")).all() and len(item["candidates"]) == 4
    assert classes[0] == CLS and classes[1:len(question) + 3].eq(QUESTION).all()
    end = int(tokens.eq(d.eos()).nonzero()[0])  # the </s> closing the candidates
    assert classes[item["candidates"][0]:end].eq(CANDIDATE).all() and classes[end:].eq(0).all()
    mask = batch(task, "valid", [0])["net_input"]["global_attention_mask"][0]
    assert mask.nonzero().flatten().tolist() == list(range(1, end))  # question + candidates, not <s>
    assert d.index("[/ent]") == len(d) - 1 and d.index("[q]") == d.index("<mask>") + 1


def test_score_at_name_reads_each_candidates_first_token(wikihop_data):
    """--score-at-name: the scored positions are the first token of each candidate's text (right
    after its [ent]), in every chunk; the input itself is unchanged."""
    task, _, _ = task_and_model(wikihop_data, "longformer_wikihop")
    named, _, _ = task_and_model(wikihop_data, "longformer_wikihop", "--score-at-name")
    at_ent, at_name = task.load_dataset("valid"), named.load_dataset("valid")
    for index in range(len(at_ent)):
        ent, name = at_ent[index], at_name[index]
        assert [p + 1 for p in ent["candidates"]] == name["candidates"]
        first = at_ent.first_candidate[index]
        for (tokens, _), (same, _) in zip(ent["chunks"], name["chunks"]):
            assert torch.equal(tokens, same)
            assert tokens[name["candidates"]].tolist() == [int(at_ent.candidates[first + k][0])
                                                           for k in range(len(name["candidates"]))]


def test_long_input_is_chunked_and_scores_average_chunks_run_alone(wikihop_data):
    task, model, _ = task_and_model(wikihop_data, "longformer_wikihop")
    dataset = task.load_dataset("valid")
    many = [i for i in range(len(dataset)) if len(dataset[i]["chunks"]) > 1]
    assert many, "the sample should have an example longer than --max-positions"
    picks = [many[0], next(i for i in range(len(dataset)) if len(dataset[i]["chunks"]) == 1)]
    sample = batch(task, "valid", picks)
    with torch.no_grad():
        got = candidate_logits(model(**sample["net_input"], span_head_name="wikihop")[0],
                               sample["candidate_positions"], sample["chunk_example"], sample["candidate_valid"])
        for b, index in enumerate(picks):
            item, scores = dataset[index], []
            for tokens, classes in item["chunks"]:
                assert len(tokens) <= 128
                logits = model(src_tokens=tokens[None], global_attention_mask=(classes == QUESTION) |
                               (classes == CANDIDATE)[None], span_head_name="wikihop")[0][0]
                scores.append(logits[item["candidates"]])
            torch.testing.assert_close(got[b], torch.stack(scores).mean(0), atol=2e-5, rtol=1e-4)


def test_smaller_checkpoint_loads_with_new_marker_rows(wikihop_data):
    _, model, _ = task_and_model(wikihop_data, "longformer_wikihop", seed=1)
    state = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("span_heads.")}
    for key in ("encoder.sentence_encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias"):
        state[key] = state[key][:-4]  # the pretrained checkpoint: no markers, no WikiHop head
    pretrained = state["encoder.sentence_encoder.embed_tokens.weight"].clone()
    _, fresh, _ = task_and_model(wikihop_data, "longformer_wikihop", seed=2)
    new_rows = fresh.encoder.sentence_encoder.embed_tokens.weight[-4:].detach().clone()
    fresh.load_state_dict(state, strict=True, model_cfg=None)
    embed = fresh.encoder.sentence_encoder.embed_tokens.weight.detach()
    torch.testing.assert_close(embed[:-4], pretrained)
    torch.testing.assert_close(embed[-4:], new_rows)


@pytest.mark.device
def test_wikihop_recipe_smoke_run_trains_and_validates_every_example(wikihop_data, tmp_path):
    """recipes/finetune_wikihop.sh with CPU=1 (its smoke run; with --device cuda: on the GPU in bf16), the tiny model, 2 epochs."""
    env = {**subprocess_env(), "PATH": f"{Path(FAIRSEQ_TRAIN).parent}{os.pathsep}{os.environ['PATH']}", "CPU": "1" if device() == "cpu" else "0",
           "DATA": str(wikihop_data), "MAX_POSITIONS": "128", "ATTENTION_WINDOW": "8", "MAX_UPDATE": "100",
           "BATCH_SIZE": "4", "MAX_EPOCH": "2", "DROPOUT": "0", "SEED": "3", "SAVE_DIR": str(tmp_path / "save"),
           "MODEL_ARGS": "--encoder-layers 2 --encoder-embed-dim 64 --encoder-ffn-embed-dim 128 "
                         "--encoder-attention-heads 4 --attention-dropout 0 --lr 1e-3"
                          + ("" if device() == "cpu" else " --bf16")}
    text = run_logged(["bash", REPO / "recipes" / "finetune_wikihop.sh"], tmp_path / "train.log", timeout=240, env=env)
    assert len(train_inner(text)) == 16  # 32 examples, batch 4, 2 epochs
    lines = [line for line in text.splitlines() if "valid on 'valid' subset" in line]
    valid = {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}
    count = valid["accuracy"] / 100 * 10  # a whole number of the 10 valid examples
    assert abs(count - round(count)) < 0.01 and valid["loss"] > 0
    assert (tmp_path / "save" / "checkpoint_best.pt").is_file()


def test_a_file_that_is_not_wikihop_is_one_error_line_and_writes_nothing(tmp_path):
    (tmp_path / "train.json").write_text("not json")
    (tmp_path / "dev.json").write_text(json.dumps({"id": "a dict, not a list"}))
    for train in ("train.json", "dev.json"):
        done = prepare("wikihop", tmp_path / "out", tmp_path / train, tmp_path / "dev.json",
                       "--train-sentencepiece", "320")
        assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
        assert not (tmp_path / "out").exists()
