"""The fine-tuning tasks' batches carry ``max_global_tokens`` (``finetune_base.collate_inputs``):
the batch's largest global count, counted on the host and rounded up to a multiple of 8, which
the encoder takes as ``AttentionMasks``' static bound; the outputs equal those without it."""
import torch

from tests.support.finetune_models import batch, task_and_model
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)

from fairseq_longformer.tasks.finetune_base import collate_inputs


def _flags(n: int, globals_at) -> torch.Tensor:
    flags = torch.zeros(n, dtype=torch.bool)
    flags[list(globals_at)] = True
    return flags


def test_bound_is_the_largest_count_rounded_up_to_a_multiple_of_8():
    sources = [torch.arange(4, 30), torch.arange(4, 20)]
    for counts, bound in (((3, 10), 16), ((8, 1), 8), ((0, 0), 0), ((9, 0), 16)):
        net_input = collate_inputs(sources, [_flags(len(s), range(c)) for s, c in zip(sources, counts)], 1, 8)
        assert net_input["max_global_tokens"] == bound and isinstance(bound, int)
        assert net_input["global_attention_mask"].sum(1).tolist() == list(counts)
    assert "max_global_tokens" not in collate_inputs(sources, None, 1, 8)  # no mask: local attention only


def _run(model, net_input, head):
    """(span logits, the AttentionMasks the first layer received)."""
    seen = []
    hook = model.encoder.sentence_encoder.layers[0].self_attn.register_forward_pre_hook(
        lambda m, a, kw: seen.append(kw["key_padding_mask"]), with_kwargs=True)
    try:
        with torch.no_grad():
            out, _ = model(**net_input, span_head_name=head)
    finally:
        hook.remove()
    return out, seen[0]


def test_hotpotqa_batch_carries_the_bound_and_the_encoder_output_is_unchanged(hotpotqa_data):  # noqa: F811
    task, model, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    net_input = batch(task, "valid", [0, 1, 2, 3])["net_input"]
    counts = net_input["global_attention_mask"].sum(1)
    most, bound = int(counts.max()), net_input["max_global_tokens"]
    assert len(set(counts.tolist())) > 1 and bound % 8 == 0 and most <= bound < most + 8
    bounded, masks = _run(model, net_input, "hotpotqa")
    assert masks.max_global == min(bound, net_input["src_tokens"].shape[1]) and masks.global_rows is None
    unbounded, exact = _run(model, {k: v for k, v in net_input.items() if k != "max_global_tokens"}, "hotpotqa")
    assert exact.max_global == most
    for name in ("span", "type", "paragraph", "sentence"):
        torch.testing.assert_close(bounded[name], unbounded[name], msg=lambda m: f"{name}: {m}")
