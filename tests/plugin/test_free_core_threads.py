"""Training threads that follow the free cores (``fairseq_longformer.training.free_core_threads``,
installed under LONGFORMER_THREADS=auto by ``runtime.training_features``): the counter is
monkeypatched, so these check what the hook does with its answer, never a timing."""
from types import SimpleNamespace

import pytest
import torch
from fairseq.trainer import Trainer

from fairseq_longformer.runtime import training_features
from fairseq_longformer.training import free_core_threads
from longformer_common import free_cores


@pytest.fixture
def counter(monkeypatch):
    """The free-core counter answers what ``answer["free"]`` holds; torch's count is restored after."""
    answer = {"free": 2}
    monkeypatch.setattr(free_cores, "free_cores", lambda interval=0.2: answer["free"])
    monkeypatch.setattr(free_cores, "free_between", lambda first, second, allowed: answer["free"])
    before = torch.get_num_threads()
    yield answer
    torch.set_num_threads(before)


def test_the_count_follows_the_free_cores_every_n_updates(counter, caplog):
    follower = free_core_threads.ThreadsFollowingFreeCores(most=2, every=10)
    assert follower.start() == 2 and torch.get_num_threads() == 2
    counter["free"] = 1
    follower.after_update(9)  # not a check: nothing changes
    assert torch.get_num_threads() == 2
    with caplog.at_level("INFO", logger=free_core_threads.__name__):
        follower.after_update(10)
    assert torch.get_num_threads() == 1 and "threads: 2 -> 1" in caplog.text
    counter["free"] = 4  # more free cores than torch's own count: capped at it
    follower.after_update(20)
    assert torch.get_num_threads() == 2


def test_the_trainer_re_checks_under_auto(counter, monkeypatch):
    monkeypatch.setattr(Trainer, "set_num_updates", Trainer.set_num_updates)  # restored after the test
    monkeypatch.setenv("LONGFORMER_THREADS", "auto")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    counter["free"] = 1
    torch.set_num_threads(2)  # torch's own count when training starts: the most auto uses
    training_features.threads_following_free_cores()
    assert Trainer.set_num_updates._longformer_patched and torch.get_num_threads() == 1
    installed = Trainer.set_num_updates
    training_features.threads_following_free_cores()  # a second apply changes nothing
    assert Trainer.set_num_updates is installed

    trainer = SimpleNamespace(lr_step_update=lambda: None, quantizer=None)
    counter["free"] = 2
    Trainer.set_num_updates(trainer, free_core_threads.CHECK_EVERY - 1)
    assert torch.get_num_threads() == 1 and trainer._num_updates == free_core_threads.CHECK_EVERY - 1
    Trainer.set_num_updates(trainer, free_core_threads.CHECK_EVERY)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("environ", [{}, {"LONGFORMER_THREADS": "auto", "OMP_NUM_THREADS": "2"}])
def test_nothing_is_installed_without_auto_or_over_an_explicit_count(counter, monkeypatch, environ):
    monkeypatch.setattr(Trainer, "set_num_updates", Trainer.set_num_updates)
    original = Trainer.set_num_updates
    counter["free"] = 1
    training_features.threads_following_free_cores(environ=environ)
    assert Trainer.set_num_updates is original
