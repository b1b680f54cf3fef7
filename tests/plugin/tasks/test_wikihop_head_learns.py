"""The WikiHop head's path from a candidate's text to its score: no gather, mask or gradient stops
it (on a variant where the answer is always the candidate named "bravo", the tiny from-scratch model,
trained in-process with the learning checks' optimiser, fits the training set in a few dozen
updates), but at initialisation the score barely depends on the candidate's own text.

The head scores each candidate at its ``[ent]`` marker (the paper's choice). With the default
global classes the marker is a global token, whose output row is attention over the whole input
with the global projections: it has no local view of the candidate name beside it. A from-scratch
encoder must first learn position-to-position attention before the head sees which candidate it
scores (a pretrained one, as in the paper, starts with it).

Where the support names the answer beyond every candidate's local reach, the default start
(global Q, K copied from random local ones: uniform global attention; the score read at [ent])
stays at chance; a from-scratch model started with ``--global-init identity`` (global tokens
attend to copies of their own token) and scoring each candidate at its name (``--score-at-name``)
learns it: the setting of the WikiHop learning check."""
import json
import random

import pytest
import torch

from tests.support.finetune_data import prepare
from tests.support.finetune_models import batch, task_and_model

NAMES = ["alpha", "bravo", "delta", "gamma"]
FILLER = "the river runs past old walls and the market opens early every day".split()


def _records(rng: random.Random, n: int) -> list:
    out = []
    for i in range(n):
        candidates = rng.sample(NAMES, len(NAMES))
        words = " ".join(rng.choice(FILLER) for _ in range(rng.choice([5, 15])))
        out.append({"id": f"T_{i}", "query": "which name", "answer": "bravo", "candidates": candidates,
                    "supports": [words]})
    return out


def _named_records(rng: random.Random, n: int) -> list:
    """The answer, a random one of NAMES, named twice in the support past word 20 (beyond the
    tiny model's 2 x 8-token local reach of every candidate); the candidates shuffled."""
    out = []
    for i in range(n):
        answer, candidates = rng.choice(NAMES), rng.sample(NAMES, len(NAMES))
        words = [rng.choice(FILLER) for _ in range(40)]
        for at in sorted(rng.sample(range(20, 40), 2), reverse=True):
            words.insert(at, answer)
        out.append({"id": f"N_{i}", "query": "which name", "answer": answer, "candidates": candidates,
                    "supports": [" ".join(words)]})
    return out


def _prepared(tmp_path_factory, name: str, records) -> object:
    raw = tmp_path_factory.mktemp(f"{name}_raw")
    (raw / "train.json").write_text(json.dumps(records(64)))
    (raw / "dev.json").write_text(json.dumps(records(8)))
    out = tmp_path_factory.mktemp(name) / "data"
    done = prepare("wikihop", out, raw / "train.json", raw / "dev.json", "--train-sentencepiece", "320")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def named_in_support(tmp_path_factory):
    rng = random.Random(0)
    return _prepared(tmp_path_factory, "named", lambda n: _named_records(rng, n))


@pytest.fixture(scope="module")
def always_bravo(tmp_path_factory):
    rng = random.Random(0)
    return _prepared(tmp_path_factory, "bravo", lambda n: _records(rng, n))


def train_accuracy(data, updates: int, *extra: str) -> float:
    """Train the tiny model ``updates`` steps (Adam, lr 1e-3, batch 16, no dropout) on the train
    split; the percent of train examples it then answers right."""
    task, model, args = task_and_model(data, "longformer_wikihop", "--dropout", "0", *extra)
    criterion = task.build_criterion(args)
    dataset = task.load_dataset("train")
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
    rng = random.Random(1)
    for _ in range(updates):
        loss, size, _ = criterion(model, batch(task, "train", rng.sample(range(len(dataset)), 16)))
        optimizer.zero_grad()
        (loss / size).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    model.eval()
    with torch.no_grad():
        _, _, log = criterion(model, batch(task, "train", list(range(len(dataset)))))
    return 100.0 * int(log["_ncorrect"]) / len(dataset)


def test_a_global_marker_barely_sees_its_own_candidate_at_initialisation(always_bravo):
    """Change candidate 0's name: at initialisation its [ent] score moves by a hundredth or less of
    what the score read at the name itself moves. The global [ent] row is attention over the whole
    input, the name one key among N; why a from-scratch model starts blind to which candidate it
    scores (the head must first learn to attend from [ent] to the next position)."""
    task, model, args = task_and_model(always_bravo, "longformer_wikihop")
    sample = batch(task, "train", [0])
    tokens = sample["net_input"]["src_tokens"]
    marker = int(sample["candidate_positions"][0, 0])
    other = tokens.clone()
    other[0, marker + 1] = task.source_dictionary.index("[q]")  # candidate 0's name -> another token
    with torch.no_grad():
        before = model(**sample["net_input"], span_head_name="wikihop")[0][0]
        after = model(**{**sample["net_input"], "src_tokens": other}, span_head_name="wikihop")[0][0]
    moved = (before - after).abs()
    assert moved[marker] < 0.01 * moved[marker + 1] and moved[marker + 1] > 1e-2, (moved[marker], moved[marker + 1])


def test_head_learns_the_answer_named_by_the_candidate_in_a_few_dozen_updates(always_bravo):
    accuracy = train_accuracy(always_bravo, 40)
    assert accuracy >= 90.0, accuracy


def test_from_identity_start_at_the_name_the_head_learns_which_candidate_the_support_names(named_in_support):
    """The WikiHop task proper in small (the answer is whichever candidate the support names, far
    from every candidate): from the identity start, scored at the name, the head fits the
    training set."""
    accuracy = train_accuracy(named_in_support, 40, "--global-init", "identity", "--score-at-name")
    assert accuracy >= 90.0, accuracy
