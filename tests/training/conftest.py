"""Fixtures for the training tests (helpers live in training_helpers.py)."""
import pytest

from training_helpers import FAIRSEQ_TRAIN, REFERENCE_UPDATES, run_logged, tiny_train_cmd, train_inner


@pytest.fixture(scope="session")
def reference_run(kjv_data_bin, tmp_path_factory):
    """ONE process doing what two ranks do together: batch 4 x update-freq 2 (two ranks: batch 4
    each). fairseq gives rank r the batches r, r + 2, ... of the epoch, the same batches one
    process accumulates per update, so the losses must agree. Returns the per-update records and
    the final checkpoint (a small trained model, used as the "RoBERTa" of the recipe tests)."""
    work = tmp_path_factory.mktemp("reference")
    cmd = [FAIRSEQ_TRAIN, *tiny_train_cmd(kjv_data_bin, work / "save", REFERENCE_UPDATES,
                                          "--update-freq", "2", "--no-epoch-checkpoints")]
    text = run_logged(cmd, work / "train.log", timeout=240)
    records = train_inner(text)
    assert sorted(records) == list(range(1, REFERENCE_UPDATES + 1)), sorted(records)
    checkpoint = work / "save" / "checkpoint_last.pt"
    assert checkpoint.is_file()
    return records, checkpoint


@pytest.fixture(scope="session")
def reference_curve(reference_run):
    return reference_run[0]


@pytest.fixture(scope="session")
def tiny_checkpoint(reference_run):
    return reference_run[1]
