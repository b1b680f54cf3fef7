"""A schema-exact HotpotQA sample (distractor setting: ``_id``, ``question``, ``answer``, ``type``,
``level``, ``supporting_facts`` as [title, sentence index], ``context`` as [title, [sentences]]),
with malformed records of every reason the reader counts, binarized by longformer-prepare-task
for the tiny model (inputs cut to 128 tokens, so some supporting facts are cut away)."""
import json
import random
from pathlib import Path

import pytest

from tests.support.finetune_data import prepare

PEOPLE = ["Alice Marsh", "Bern Ostrow", "Cara Lindqvist", "Dov Halpern", "Emil Sauer", "Fay Okafor"]
TOWNS = ["Lerida", "Tenby", "Oulu", "Grasse", "Nidaros", "Sabadell"]
FILMS = ["The Quiet Harbour", "Night Market", "Salt Roads", "Winter Lamps", "Glass River", "Old Walls"]
FILLER = "the river runs past old walls and the market opens early every day".split()
# reason -> malformed records of that reason in the training file (the reader's wording)
BAD = {"no answer": 1, "empty context": 1, "supporting fact names a title missing from the context": 1,
       "supporting fact's sentence index out of range": 1, "answer not found in the context": 1,
       "not a HotpotQA record (_id, question, answer, supporting_facts, context)": 1}
MAX_INPUT_TOKENS = 128


def _filler(rng: random.Random, n: int) -> str:
    return " " + " ".join(rng.choice(FILLER) for _ in range(n)).capitalize() + "."


def _distractors(rng: random.Random, taken, n: int, words: int) -> list:
    """Paragraphs about other towns; some end in an empty sentence, which keeps its index (the
    supporting-fact ids count it): an [s] marker with no words before it."""
    towns = [t for t in TOWNS if t not in taken]
    return [[town, [f"{town} is a town." + _filler(rng, words)] + [""] * (words == 2)]
            for town in rng.sample(towns, n)]


def bridge(rng: random.Random, i: int, words: int) -> dict:
    """Where was the director of a film born? Film paragraph -> director paragraph -> town."""
    film, person, town = rng.choice(FILMS), rng.choice(PEOPLE), rng.choice(TOWNS)
    context = [[film, [f"{film} is a film.", f" It was directed by {person}.", _filler(rng, words)]],
               [person, [f"{person} is a director.", f" {person} was born in {town}."]]]
    context += _distractors(rng, {town}, 1, words)
    rng.shuffle(context)
    return {"_id": f"hp{i:04d}", "question": f"Where was the director of {film} born?", "answer": town,
            "type": "bridge", "level": "medium", "supporting_facts": [[film, 1], [person, 1]], "context": context}


def comparison(rng: random.Random, i: int, words: int) -> dict:
    """Were two people born in the same town? A yes/no answer."""
    a, b = rng.sample(PEOPLE, 2)
    town_a, town_b = rng.choice(TOWNS), rng.choice(TOWNS)
    context = [[a, [f"{a} is a painter.", f" {a} was born in {town_a}."]],
               [b, [f"{b} is a writer.", f" {b} was born in {town_b}.", _filler(rng, words)]]]
    context += _distractors(rng, {town_a, town_b}, 1, words)
    rng.shuffle(context)
    return {"_id": f"hp{i:04d}", "question": f"Were {a} and {b} born in the same town?",
            "answer": "yes" if town_a == town_b else "no", "type": "comparison", "level": "easy",
            "supporting_facts": [[a, 1], [b, 1]], "context": context}


def malformed(rng: random.Random, i: int, reason: str) -> dict:
    record = bridge(rng, i, 4)
    if reason == "no answer":
        record["answer"] = ""
    elif reason == "empty context":
        record["context"] = []
    elif reason.startswith("supporting fact names"):
        record["supporting_facts"].append(["Atlantis", 0])
    elif reason.startswith("supporting fact's"):
        record["supporting_facts"][0][1] = 7
    elif reason.startswith("answer not found"):
        record["answer"] = "Atlantis"
    else:
        del record["context"]
    return record


def records(rng: random.Random, n: int, bad: dict) -> list:
    made = [(bridge if i % 3 else comparison)(rng, i, rng.choice([1, 2, 20])) for i in range(n)]
    for reason, count in bad.items():
        made += [malformed(rng, len(made), reason) for _ in range(count)]
    return made


def write_sample(folder: Path, seed: int = 0) -> tuple:
    """hotpot_train.json (24 good records and the BAD ones) and hotpot_dev.json (9 good, 1 bad)."""
    rng = random.Random(seed)
    train, dev = folder / "hotpot_train_v1.1.json", folder / "hotpot_dev_distractor_v1.json"
    train.write_text(json.dumps(records(rng, 24, BAD)))
    dev.write_text(json.dumps(records(rng, 9, {"answer not found in the context": 1})))
    return train, dev


@pytest.fixture(scope="session")
def hotpotqa_data(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("hotpotqa_raw")
    train, dev = write_sample(raw)
    out = tmp_path_factory.mktemp("hotpotqa") / "data"
    done = prepare("hotpotqa", out, train, dev, "--train-sentencepiece", "600",
                   "--max-input-tokens", str(MAX_INPUT_TOKENS))
    assert done.returncode == 0, done.stderr
    (out.parent / "prepare.out").write_text(done.stdout)
    return out
