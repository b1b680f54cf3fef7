"""``fairseq-train --attention-dropout 0.1`` trains: the keep mask is drawn per layer and step
from torch's generator, so fairseq's --seed makes a run reproducible, and it is really applied
(the weights after training differ from an --attention-dropout 0 run; at initialisation the
attention barely moves the loss, so the logged losses alone could not tell)."""
import torch

from tests.support.training import FAIRSEQ_TRAIN, run_logged, tiny_train_cmd, train_inner


def _train(data, tmp_path, name, attention_dropout):
    log = tmp_path / f"{name}.log"
    save_dir = tmp_path / name
    text = run_logged([FAIRSEQ_TRAIN, *tiny_train_cmd(data, save_dir, 4, "--no-epoch-checkpoints",
                                                      "--attention-dropout", attention_dropout)],
                      log, timeout=300)
    state = torch.load(save_dir / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    return train_inner(text), state["model"], state["cfg"]["model"]


def test_fairseq_train_with_attention_dropout(kjv_data_bin, tmp_path):
    curve, weights, cfg = _train(kjv_data_bin, tmp_path, "a", "0.1")
    _, weights_again, _ = _train(kjv_data_bin, tmp_path, "b", "0.1")
    _, weights_plain, _ = _train(kjv_data_bin, tmp_path, "c", "0")
    assert cfg.attention_dropout == 0.1
    assert sorted(curve) == [1, 2, 3, 4]
    assert all(0 < row["loss"] < 100 for row in curve.values())
    assert all(torch.equal(weights[key], weights_again[key]) for key in weights)
    assert not all(torch.equal(weights[key], weights_plain[key]) for key in weights)
