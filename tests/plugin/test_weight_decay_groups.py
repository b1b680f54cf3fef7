"""No weight decay on biases and LayerNorm parameters (``training/lr_groups.py``, installed by
``runtime``): models of every family built through fairseq's builders, the optimizer through
fairseq's Trainer (or the patched ``optim.build_optimizer``), each parameter's group checked
against a rule written here by parameter name, as BERT's and RoBERTa's fine-tuning state it."""
import argparse
import types

import pytest
import torch
from fairseq import optim
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.trainer import Trainer

from fairseq_longformer.criterions.longformer_hotpotqa import LongformerHotpotQACriterion
from tests.support.charlm import TINY, CharTask
from tests.support.finetune_models import task_and_model
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)

WEIGHT_DECAY, LR = 0.01, 1e-3
OPTIMIZER = ["--optimizer", "adam", "--weight-decay", str(WEIGHT_DECAY), "--lr", str(LR)]


def exempt_names(model) -> set:
    """Every bias and every parameter of a LayerNorm module, by name."""
    layer_norms = {f"{name}.{p}" if name else p for name, module in model.named_modules()
                   if isinstance(module, torch.nn.LayerNorm) for p, _ in module.named_parameters(recurse=False)}
    return layer_norms | {name for name, _ in model.named_parameters() if name.split(".")[-1] == "bias"}


def decay_by_name(model, optimizer) -> dict:
    """parameter name -> the weight decay of its torch parameter group (each in exactly one)."""
    group_of = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            assert id(p) not in group_of, "a parameter in two groups"
            group_of[id(p)] = group["weight_decay"]
    return {name: group_of[id(p)] for name, p in model.named_parameters()}


def check(model, optimizer):
    exempt = exempt_names(model)
    assert exempt and len(exempt) < len(dict(model.named_parameters()))
    expected = {name: 0.0 if name in exempt else WEIGHT_DECAY for name, _ in model.named_parameters()}
    assert decay_by_name(model, optimizer) == expected


@pytest.fixture(scope="module")
def hotpotqa(hotpotqa_data):  # noqa: F811
    """A Longformer (RoBERTa family) with the HotpotQA head, and the fairseq-train cfg."""
    task, model, args = task_and_model(hotpotqa_data, "longformer_hotpotqa", *OPTIMIZER)
    return task, model, convert_namespace_to_omegaconf(args)


def test_longformer_encoder_and_head_through_the_trainer(hotpotqa):
    task, model, cfg = hotpotqa
    names = dict(model.named_parameters())
    exempt = exempt_names(model)
    assert "encoder.sentence_encoder.layernorm_embedding.weight" in exempt  # the embeddings' LayerNorm
    assert any(n.startswith("span_heads.") and n.endswith(".bias") for n in exempt)
    trainer = Trainer(cfg, task, model, LongformerHotpotQACriterion(task))
    check(model, trainer.optimizer)
    # what the groups do: one step of zero gradients moves only the decayed weights, by lr x decay
    before = {n: p.detach().clone() for n, p in names.items()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    trainer.optimizer.set_lr(LR)
    trainer.optimizer.step()
    for name, p in names.items():
        factor = 1.0 if name in exempt else 1.0 - LR * WEIGHT_DECAY
        torch.testing.assert_close(p.detach(), before[name] * factor, rtol=1e-6, atol=0, msg=name)


def test_head_learning_rate_tags_and_weight_decay_combine(hotpotqa):
    task, model, cfg = hotpotqa
    head = {id(p) for p in model.span_heads.parameters()}
    try:
        for p in model.span_heads.parameters():
            p.optim_overrides = {"optimizer": {"lr_scale": 10.0}}
        optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
        optimizer.set_lr(LR)
    finally:
        for p in model.span_heads.parameters():
            del p.optim_overrides
    check(model, optimizer)
    assert len(optimizer.param_groups) == 4  # encoder / head x decayed / exempt
    for group in optimizer.param_groups:
        in_head = {id(p) in head for p in group["params"]}
        assert len(in_head) == 1 and group["lr"] == pytest.approx(LR * (10.0 if in_head.pop() else 1.0))


def test_without_weight_decay_one_group_as_fairseq(hotpotqa):
    _, model, cfg = hotpotqa
    cfg.optimizer.weight_decay = 0.0
    try:
        optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
    finally:
        cfg.optimizer.weight_decay = WEIGHT_DECAY
    assert len(optimizer.param_groups) == 1 and optimizer.param_groups[0]["weight_decay"] == 0.0


def _led():
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for word in "a b c d e f".split():
        dictionary.add_symbol(word)
    args = argparse.Namespace(encoder_layers=1, decoder_layers=1, encoder_embed_dim=16, decoder_embed_dim=16,
                              encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32, encoder_attention_heads=2,
                              decoder_attention_heads=2, max_source_positions=64, max_target_positions=32,
                              attention_window="4", task="translation")
    ARCH_CONFIG_REGISTRY["led_base"](args)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None)
    return ARCH_MODEL_REGISTRY["led_base"].build_model(args, task)


def _lm():
    args = argparse.Namespace(**TINY)
    ARCH_CONFIG_REGISTRY["longformer_lm"](args)
    return ARCH_MODEL_REGISTRY["longformer_lm"].build_model(args, CharTask())


@pytest.mark.parametrize("build", [_led, _lm], ids=["led", "longformer_lm"])
def test_every_model_family(hotpotqa, build):
    model = build()
    check(model, optim.build_optimizer(hotpotqa[2].optimizer, list(model.parameters())))


def test_fp16_keeps_the_groups_apart_unflattened(hotpotqa, caplog):
    """fairseq's fp16 optimizer would copy every parameter into one flat fp32 tensor (one group,
    all decayed): it is built unflattened instead, each fp32 copy in its parameter's group."""
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    _, model, cfg = hotpotqa
    assert not cfg.common.fp16_no_flatten_grads
    names = [name for name, _ in model.named_parameters()]
    with caplog.at_level("INFO"):
        optimizer = FP16Optimizer.build_optimizer(cfg, list(model.parameters()))
    assert not optimizer.has_flat_params and "kept unflattened" in caplog.text
    group_of = {id(p): g["weight_decay"] for g in optimizer.fp32_optimizer.param_groups for p in g["params"]}
    exempt = exempt_names(model)
    assert [group_of[id(p)] for p in optimizer.fp32_params] == \
        [0.0 if name in exempt else WEIGHT_DECAY for name in names]
