"""longformer_experiments.led_demo and recipes/led_demo.sh: the task puts the target where neither
the lead baseline nor a BART that sees only its own positions can find it, the books of the splits
do not overlap, and the demo runs end to end in a tiny setting (a results table with finite
scores that names the command that made it)."""
import json
import math
import os
import subprocess

import pytest

from longformer_experiments.led_demo import main as led_demo
from longformer_experiments.led_demo import score, task
from tests.conftest import REPO

POSITIONS = 128


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("led_demo_data")
    led_demo.main(["build", str(work), "--positions", str(POSITIONS), "--vocab", "1000", "--max-train", "200"])
    rows = {split: [json.loads(line) for line in open(work / "data" / f"{split}.jsonl", encoding="utf-8")]
            for split in ("train", "valid", "test")}
    return work, rows


def test_target_is_the_closing_sentence_beyond_the_positions(built):
    work, rows = built
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(work / "data" / "spm.model"))
    for split, examples in rows.items():
        assert examples, split
        sources = (work / "data" / f"{split}.src").read_text(encoding="utf-8").splitlines()
        targets = (work / "data" / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
        assert len(sources) == len(targets) == len(examples)
        for example, source, target in zip(examples, sources, targets):
            assert example["source"].endswith(example["target"])
            assert task.sentences_of(example["source"])[-1] == example["target"]
            low, high = task.TARGET_WORDS
            assert low <= len(example["target"].split()) <= high
            pieces, tail = source.split(), target.split()
            assert pieces[-len(tail):] == tail  # the pieces files say the same
            # 2-3x the BART's positions, + </s> within the LED's 3 x POSITIONS
            assert 2 * POSITIONS < len(pieces) + 1 == example["source_tokens"] <= 3 * POSITIONS
            # a BART of POSITIONS positions (POSITIONS - 1 tokens and </s>) never sees the target
            assert len(pieces) - len(tail) >= POSITIONS - 1
            assert sp.decode(pieces[-len(tail):]) == example["target"]


def test_splits_share_no_book(built):
    _, rows = built
    books = {split: {e["book"] for e in examples} for split, examples in rows.items()}
    assert not books["train"] & books["valid"] and not books["train"] & books["test"]
    assert not books["valid"] & books["test"]


def test_lead_baseline_scores_low_by_construction(built):
    _, rows = built
    examples = rows["test"]
    lead = score.rouge([score.lead(e["source"]) for e in examples], [e["target"] for e in examples])
    oracle = score.rouge([e["target"] for e in examples], [e["target"] for e in examples])
    assert oracle["rougeL"] == 100.0
    assert lead["rougeL"] < 30, lead  # only the corpus's common words in common
    assert all(score.lead(e["source"]) != e["target"] for e in examples)


def test_demo_runs_end_to_end_tiny(tmp_path):
    """The whole recipe with 64 positions, a few updates and few examples: a results table with
    finite scores for the lead baseline, the truncated BART and the LED."""
    env = dict(os.environ, OMP_NUM_THREADS="1", WORK=str(tmp_path / "demo"), POSITIONS="64",
               PRETRAIN_UPDATES="3", FINETUNE_UPDATES="3", MAX_TRAIN="24", MAX_EVAL="1", BEAM="2")
    result = subprocess.run(["bash", str(REPO / "recipes" / "led_demo.sh")], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
    for step in ("== 1.", "== 2.", "== 3a.", "== 3b.", "== 4a.", "== 4b.", "== 5."):
        assert step in result.stdout
    assert "64 -> 192 encoder positions" in result.stdout
    results = json.loads((tmp_path / "demo" / "results.json").read_text())
    systems = results["systems"]
    assert list(systems) == ["lead (first sentence)", "BART, sources cut to 64", "LED, whole sources"]
    for scores in systems.values():
        assert all(math.isfinite(scores[k]) and 0 <= scores[k] <= 100 for k in ("rouge1", "rouge2", "rougeL"))
    assert systems["LED, whole sources"]["missing"] == 0  # every test passage got a hypothesis
    assert systems["BART, sources cut to 64"]["missing"] == 0
    table = (tmp_path / "demo" / "results.md").read_text()
    assert "| LED, whole sources |" in table and "| lead (first sentence) |" in table
    assert "POSITIONS=64 " in table.splitlines()[-1] and "bash recipes/led_demo.sh`" in table  # how to remake it
