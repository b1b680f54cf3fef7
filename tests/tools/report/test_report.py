"""The end-of-job report's parts: the unigram baselines from fairseq binaries, and fairseq's log
lines (simple and json formats, a resumed run repeating updates)."""
import math
from collections import Counter

import pytest

from longformer_tools.report.training_log import parse_line, read_training_log
from longformer_tools.report.unigram import unigram_baseline

SIMPLE_TRAIN = ("2026-11-23 22:11:08 | INFO | train_inner | epoch 001:    110 / 554 loss=8.633, bpc=8.633, "
                "acc=6.9, ppl=396.98, wps=2221.5, ups=1.49, wpb=1490, bsz=2, num_updates=110, lr=0.000529412")
SIMPLE_VALID = ("2026-11-23 22:11:02 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.806 | "
                "bpc 8.806 | acc 7.5 | ppl 447.71 | wps 7195.6 | wpb 1389.7 | bsz 2 | num_updates 100")
JSON_VALID = ('2026-11-23 22:11:02 | INFO | valid | {"epoch": 1, "valid_loss": "7.5", "valid_bpc": "7.5", '
              '"valid_acc": "20.1", "valid_num_updates": "12"}')


def test_simple_and_json_lines():
    assert parse_line(SIMPLE_TRAIN) == ("train_inner", pytest.approx(
        {"loss": 8.633, "bpc": 8.633, "acc": 6.9, "ppl": 396.98, "wps": 2221.5, "ups": 1.49, "wpb": 1490,
         "bsz": 2, "num_updates": 110, "lr": 0.000529412}))
    kind, stats = parse_line(SIMPLE_VALID)
    assert kind == "valid" and stats["bpc"] == 8.806 and stats["acc"] == 7.5 and stats["num_updates"] == 100
    kind, stats = parse_line(JSON_VALID)
    assert kind == "valid" and stats == {"epoch": 1, "loss": 7.5, "bpc": 7.5, "acc": 20.1, "num_updates": 12}
    assert parse_line("2026-11-23 | INFO | fairseq.trainer | begin training epoch 1") is None


def test_resumed_run_keeps_the_last_record_of_each_update(tmp_path):
    lines = [SIMPLE_VALID, SIMPLE_VALID.replace("bpc 8.806", "bpc 9.9").replace("num_updates 100", "num_updates 150"),
             # the run was killed after 150 and resumed from 100: update 150 is redone
             SIMPLE_VALID.replace("bpc 8.806", "bpc 8.5").replace("num_updates 100", "num_updates 150")]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines + [SIMPLE_TRAIN]) + "\n")
    log = read_training_log(path)
    assert log.series("valid", "bpc") == [(100, 8.806), (150, 8.5)]
    assert log.series("train", "bpc") == [(110, 8.633)]


def test_unigram_baselines_from_binaries(tmp_path, tiny_binaries):
    train = [list("aaab"), list("abc")]
    valid = [list("aab"), list("dd")]  # d never occurs in train
    dictionary = tiny_binaries(tmp_path, train, valid)

    base = unigram_baseline(tmp_path, "valid")
    valid_tokens = [t for line in valid for t in line + ["</s>"]]
    counts = Counter(valid_tokens)
    n = len(valid_tokens)
    assert base.tokens == n == 7
    assert base.entropy == pytest.approx(-sum(c / n * math.log2(c / n) for c in counts.values()))
    train_tokens = Counter(t for line in train for t in line + ["</s>"])
    total, vocab = sum(train_tokens.values()), len(dictionary)
    cross = -sum(math.log2((train_tokens[t] + 1) / (total + vocab)) for t in valid_tokens) / n
    assert base.cross_entropy_from_train == pytest.approx(cross)
    assert base.cross_entropy_from_train > base.entropy
