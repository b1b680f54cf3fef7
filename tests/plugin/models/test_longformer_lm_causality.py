"""Causality of ``longformer_lm`` through every attention implementation (reference, PyTorch,
Triton, the last in Triton's CPU interpreter here), with learned and with relative positions
(whose band bias is one more way a later key could leak in): changing a character never changes
the logits of an earlier position, and no gradient of an earlier position's loss reaches a later
character, with dilated heads and windows shorter than the sequence."""
import pytest
import torch

from tests.support.charlm import build_lm, characters

LENGTH = 48
CHANGED = (0, 1, 17, 30, 47)  # the first, the last, and positions inside the windows' reach
# Triton's CPU interpreter takes about a second per forward here: fewer cases for it
FEWER = {"triton": (0, 17, 47)}


def _model(impl, relative):
    # Triton computes in fp16/bf16/fp32 only; the others run in fp64
    dtype = torch.float32 if impl == "triton" else torch.float64
    return build_lm(attention_impl=impl, dtype=dtype, relative_positions=relative)


@pytest.mark.parametrize("relative", [False, True], ids=["learned", "relative"])
@pytest.mark.parametrize("impl", ["reference", "torch", "triton"])
def test_changing_a_character_never_changes_earlier_logits(impl, relative):
    model, task = _model(impl, relative)
    tokens = characters(task, 2, LENGTH)
    with torch.no_grad():
        before = model(tokens)[0]
        for p in FEWER.get(impl, CHANGED):
            changed = tokens.clone()
            changed[:, p] = torch.where(changed[:, p] == 10, 11, 10)  # another character
            after = model(changed)[0]
            # exactly equal: a key outside the causal window has probability exactly 0
            assert torch.equal(after[:, :p], before[:, :p]), f"{impl}: position {p} changed an earlier logit"
            # and the change is seen where it may be (so the comparison above can fail)
            assert (after[:, p] - before[:, p]).abs().max() > 1e-4


@pytest.mark.parametrize("relative", [False, True], ids=["learned", "relative"])
@pytest.mark.parametrize("impl", ["reference", "torch", "triton"])
def test_no_gradient_of_an_earlier_loss_reaches_a_later_character(impl, relative):
    model, task = _model(impl, relative)
    tokens = characters(task, 2, LENGTH, seed=1)
    embedded = {}

    def keep(module, inputs, output):
        output.retain_grad()
        embedded["x"] = output

    handle = model.decoder.embed_tokens.register_forward_hook(keep)
    try:
        for p in (20,) if impl == "triton" else (1, 20, 40):
            model.zero_grad()
            logits = model(tokens)[0]
            logits[:, :p].logsumexp(-1).sum().backward()
            grad = embedded["x"].grad  # (B, N, C)
            assert torch.count_nonzero(grad[:, p:]) == 0, f"{impl}: the loss before {p} reached later tokens"
            assert grad[:, p - 1].abs().max() > 0
    finally:
        handle.remove()
