"""The per-dataset recipes (DRY_RUN=1): the paper's settings reach fairseq-train's command line on
a GPU (fp16), and CPU=1 turns them into a smoke run (HotpotQA's two stages run for real on the
tiny sample; WikiHop's in tests/plugin/tasks/test_longformer_wikihop.py)."""
import collections
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)


def _command(tmp_path, recipe, examples=640, args=(), **env):
    (tmp_path / "stats.json").write_text(json.dumps({"splits": {"train": {"examples": examples}}}))
    done = subprocess.run(["bash", str(REPO / "recipes" / recipe), *args],
                          env={**os.environ, "DRY_RUN": "1", "DATA": str(tmp_path), "LED": "led", **env},
                          capture_output=True, text=True, check=True)
    summary, command = done.stdout.strip().splitlines()[-2:]
    return summary, shlex.split(command)


def _flag(argv, name):
    return argv[len(argv) - 1 - argv[::-1].index(name) + 1]


@pytest.mark.parametrize("recipe", ["finetune_imdb.sh", "finetune_hyperpartisan.sh"])
def test_classification_recipes(recipe, tmp_path):
    summary, argv = _command(tmp_path, recipe)
    assert "640 train examples, 32 per update, 15 epochs = 300 updates (30 warmup)" in summary
    assert _flag(argv, "--task") == "longformer_classification" and _flag(argv, "--lr") == "3e-5"
    assert "--fp16" in argv and "--cpu" not in argv
    _, smoke = _command(tmp_path, recipe, CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke
    assert (_flag(smoke, "--max-update"), _flag(smoke, "--batch-size")) == ("2", "2")


def test_triviaqa_recipe(tmp_path):
    summary, argv = _command(tmp_path, "finetune_triviaqa.sh")
    assert "640 train examples, 32 per update, 5 epochs = 100 updates" in summary
    assert _flag(argv, "--task") == "longformer_qa" and _flag(argv, "--warmup-updates") == "1000"
    assert _flag(argv, "--max-positions") == "4096" and "--fp16" in argv


def test_led_arxiv_recipe(tmp_path):
    summary, argv = _command(tmp_path, "led_arxiv.sh")
    assert "640 train documents, 16 per update, 5 epochs = 200 updates (20 warmup)" in summary
    assert (_flag(argv, "--max-source-positions"), _flag(argv, "--attention-window")) == ("16384", "512")
    assert _flag(argv, "--restore-file") == "led/model.pt" and _flag(argv, "--arch") == "led_large"
    assert "--fp16" in argv and "--checkpoint-activations" in argv
    _, smoke = _command(tmp_path, "led_arxiv.sh", CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke and _flag(smoke, "--max-update") == "2"


def test_hotpotqa_recipe(tmp_path):
    summary, argv = _command(tmp_path, "finetune_hotpotqa.sh")
    assert "640 train examples, 32 per update, 5 epochs = 100 updates" in summary
    assert _flag(argv, "--task") == _flag(argv, "--criterion") == "longformer_hotpotqa"
    assert (_flag(argv, "--lr"), _flag(argv, "--warmup-updates")) == ("5e-5", "1000")
    assert _flag(argv, "--best-checkpoint-metric") == "joint_f1" and _flag(argv, "--max-positions") == "4096"
    assert "--fp16" in argv and "--cpu" not in argv
    _, smoke = _command(tmp_path, "finetune_hotpotqa.sh", CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke and _flag(smoke, "--max-update") == "2"


def test_wikihop_recipe(tmp_path):
    summary, argv = _command(tmp_path, "finetune_wikihop.sh")
    # the paper's WikiHop settings: 15 epochs, lr 3e-5, 200 warmup updates, batch 32
    assert "640 train examples, 32 per update, 15 epochs = 300 updates" in summary
    assert _flag(argv, "--task") == _flag(argv, "--criterion") == "longformer_wikihop"
    assert (_flag(argv, "--lr"), _flag(argv, "--warmup-updates"), _flag(argv, "--batch-size")) == ("3e-5", "200", "32")
    assert _flag(argv, "--best-checkpoint-metric") == "accuracy" and "--fp16" in argv
    _, smoke = _command(tmp_path, "finetune_wikihop.sh", CPU="1")
    assert "--cpu" in smoke and "--fp16" not in smoke and _flag(smoke, "--max-update") == "2"
    _, generic = _command(tmp_path, "finetune.sh", args=["wikihop"])
    assert _flag(generic, "--task") == "longformer_wikihop" and _flag(generic, "--max-epoch") == "15"


def test_hotpotqa_two_stage_dry_run(tmp_path):
    (tmp_path / "spm.model").write_text("")
    env = {"TWO_STAGE": "1", "TRAIN_JSON": "train.json", "VALID_JSON": "dev.json", "SAVE_DIR": "ck"}
    (tmp_path / "stats.json").write_text(json.dumps({"splits": {"train": {"examples": 640}}}))
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune_hotpotqa.sh")],
                          env={**os.environ, "DRY_RUN": "1", "DATA": str(tmp_path), **env},
                          capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    stage1, select, prepare, stage2 = (shlex.split(lines[i]) for i in (2, 3, 4, 7))
    for argv in (stage1, stage2):  # both stages with the paper's settings
        assert (_flag(argv, "--lr"), _flag(argv, "--warmup-updates"), _flag(argv, "--max-epoch")) == ("5e-5", "1000", "5")
        assert _flag(argv, "--total-num-update") == "100" and "--fp16" in argv
    assert (stage1[1], _flag(stage1, "--save-dir"), _flag(stage2, "--save-dir")) == (str(tmp_path), "ck/stage1", "ck/stage2")
    assert select[0] == "longformer-select-paragraphs" and _flag(select, "--checkpoint") == "ck/stage1/checkpoint_best.pt"
    assert "train=train.json" in select and "valid=dev.json" in select and _flag(select, "--destdir") == "ck/selected"
    assert prepare[:2] == ["longformer-prepare-task", "hotpotqa"] and _flag(prepare, "--train") == "ck/selected/train.json"
    assert _flag(prepare, "--sentencepiece-model") == str(tmp_path / "spm.model")  # stage one's tokenizer
    assert stage2[1] == _flag(prepare, "--destdir") == "ck/data_stage2"


def test_hotpotqa_two_stage_smoke_run_on_cpu(hotpotqa_data, tmp_path):  # noqa: F811
    """Stage one, selection (at most 2 of the 3 paragraphs, so gold is cut), stage two, through
    longformer-select-paragraphs, longformer-prepare-task and fairseq-train; stage one is the
    one-stage recipe's run."""
    from longformer_preprocessing.tasks import hotpotqa
    from longformer_preprocessing.tasks.examples import BadExample
    from tests.support.hotpotqa_data import BAD, write_sample

    raw = tmp_path / "raw"
    raw.mkdir()
    train_json, dev_json = write_sample(raw)  # the fixture's files (same seed)
    tiny = "--encoder-layers 2 --encoder-embed-dim 64 --encoder-ffn-embed-dim 128 --encoder-attention-heads 4"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the recipe calls the console scripts
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": path, "CPU": "1", "DATA": str(hotpotqa_data),
           "MAX_POSITIONS": "128", "ATTENTION_WINDOW": "8", "MODEL_ARGS": tiny, "SAVE_DIR": str(tmp_path / "save"),
           "TWO_STAGE": "1", "TRAIN_JSON": str(train_json), "VALID_JSON": str(dev_json),
           "SELECT_ARGS": "--max-paragraphs 2"}
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune_hotpotqa.sh"), "--batch-size", "4"], env=env,
                          capture_output=True, text=True, timeout=300)
    text = done.stdout + done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    valid = [dict(re.findall(r"\| (\w+) ([-\d.]+)", line)) for line in text.splitlines() if "valid on 'valid'" in line]
    assert len(valid) == 2 and all(name in valid[1] for name in ("em", "sp_f1", "joint_f1")), valid
    assert (tmp_path / "save" / "stage2" / "checkpoint_best.pt").is_file()
    selected = tmp_path / "save" / "selected"
    report = json.loads((selected / "selection.json").read_text())["splits"]
    # the selection command scored stage one's best checkpoint as fairseq-train validated it
    for metric in ("em", "sp_f1", "joint_f1"):
        assert abs(report["valid"]["scores"]["two_paragraphs"][metric] - float(valid[0][metric])) < 0.011, metric
    for split, published in (("train", train_json), ("valid", dev_json)):
        original = {r["_id"]: r for r in json.loads(published.read_text())}
        shortened = {r["_id"]: r for r in json.loads((selected / f"{split}.json").read_text())}
        scored = [json.loads(line)["id"] for line in (hotpotqa_data / f"{split}.hotpot.jsonl").open()]
        assert len(scored) == report[split]["scored"] and shortened.keys() == original.keys()
        gold = kept = 0
        for key in scored:
            titles, mine = ([t for t, _ in r[key]["context"]] for r in (original, shortened))
            assert 1 <= len(mine) <= 2 and mine == [t for t in titles if t in mine]  # original order
            wanted = {t for t, _ in original[key]["supporting_facts"]}
            gold, kept = gold + len(wanted), kept + len(wanted & set(mine))
        assert report[split]["gold_paragraph_recall"] == round(100 * kept / gold, 2) < 100
        examples = list(hotpotqa.read(str(selected / f"{split}.json")))  # the same reader reads it
        lost = sum(report[split]["dropped_by_the_reader_next"].values())  # span answers cut away with their paragraph
        assert sum(not isinstance(e, BadExample) for e in examples) == len(scored) - lost
    dropped = collections.Counter(e.reason for e in hotpotqa.read(str(selected / "train.json"))
                                  if isinstance(e, BadExample))
    assert dropped == collections.Counter(BAD) + collections.Counter(report["train"]["dropped_by_the_reader_next"])
    stage2 = [json.loads(line) for line in (tmp_path / "save" / "data_stage2" / "valid.hotpot.jsonl").open()]
    originals = {r["_id"]: r for r in json.loads(dev_json.read_text()) if "_id" in r}
    for record in stage2:  # stage two is scored against every gold fact, also those the selection removed
        assert sorted(map(tuple, record["supporting"])) == sorted(map(tuple, originals[record["id"]]["supporting_facts"]))
