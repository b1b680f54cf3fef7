"""The global-attention mask travels from the task's batches (fairseq's data path) to every
layer; a global token reaches tokens far outside the receptive field of the windows, and
``--global-attention none`` does not; padded batches equal their rows run alone."""
import pytest
import torch

from tests.support.finetune_data import LAYERS, WINDOW
from tests.support.finetune_models import batch, task_and_model


def _layer_masks(model, net_input):
    """The AttentionMasks every layer's self-attention received."""
    seen = []
    hooks = [layer.self_attn.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["key_padding_mask"]),
                                                         with_kwargs=True)
             for layer in model.encoder.sentence_encoder.layers]
    try:
        with torch.no_grad():
            model(**net_input, span_head_name="qa")
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def test_question_mask_reaches_every_layer(qa_data):
    task, model, _ = task_and_model(qa_data, "longformer_qa")
    sample = batch(task, "valid", [0, 1, 2])
    net_input = sample["net_input"]
    mask = net_input["global_attention_mask"]
    pad = net_input["src_tokens"].eq(task.source_dictionary.pad())
    question_lengths = [len(task.datasets["valid"].questions[i]) for i in range(3)]
    for row, example in enumerate(sample["window_example"].tolist()):  # <s> + the question, nothing else
        assert mask[row].nonzero().flatten().tolist() == list(range(1 + question_lengths[example]))
    masks = _layer_masks(model, net_input)
    assert len(masks) == LAYERS
    for layer_masks in masks:
        assert torch.equal(layer_masks.is_global, mask & ~pad)


def test_none_gives_no_mask_to_any_layer(qa_data):
    task, model, _ = task_and_model(qa_data, "longformer_qa", "--global-attention", "none")
    net_input = batch(task, "valid", [0, 1])["net_input"]
    assert "global_attention_mask" not in net_input
    assert all(m.is_global is None for m in _layer_masks(model, net_input))


def _far_change(data, global_attention: str) -> float:
    """Largest change of the span logits at positions beyond the windows' reach (layers x window
    after the question) when one question token changes."""
    task, model, _ = task_and_model(data, "longformer_qa", "--global-attention", global_attention)
    net_input = batch(task, "valid", [0])["net_input"]
    tokens = net_input["src_tokens"][:1]
    net_input = {k: v[:1] if torch.is_tensor(v) else v for k, v in net_input.items()}  # the global bound: an int
    changed = dict(net_input, src_tokens=tokens.clone())
    changed["src_tokens"][0, 1] = task.source_dictionary.index("<unk>")  # first question token
    assert not torch.equal(changed["src_tokens"], tokens)
    far = 2 + LAYERS * WINDOW  # position 1 reaches at most position 1 + LAYERS * WINDOW locally
    length = int(tokens.ne(task.source_dictionary.pad()).sum())
    assert length > far + 20
    with torch.no_grad():
        before = model(**net_input, span_head_name="qa")[0][0, far:length]
        after = model(**changed, span_head_name="qa")[0][0, far:length]
    return float((before - after).abs().max())


def test_global_question_token_changes_far_outputs_and_none_does_not(qa_data):
    assert _far_change(qa_data, "task") > 1e-5  # "none" gives exactly 0
    assert _far_change(qa_data, "none") == 0.0


def test_padded_batch_with_different_global_counts_equals_rows_alone(qa_data):
    task, model, _ = task_and_model(qa_data, "longformer_qa")
    dataset = task.load_dataset("valid")
    lengths = dataset.questions.sizes
    picks = [int(i) for i in sorted(range(len(lengths)), key=lambda i: lengths[i])][::4][:4]
    sample = batch(task, "valid", picks)
    net_input = sample["net_input"]
    counts = net_input["global_attention_mask"].sum(1)
    assert len(set(counts.tolist())) >= 3, counts  # rows with different numbers of global tokens
    lengths = net_input["src_lengths"]
    assert len(set(lengths.tolist())) >= 2  # and padding
    with torch.no_grad():
        together = model(**net_input, span_head_name="qa")[0]
        for row in range(len(lengths)):
            n = int(lengths[row])
            alone = model(src_tokens=net_input["src_tokens"][row:row + 1, :n],
                          global_attention_mask=net_input["global_attention_mask"][row:row + 1, :n],
                          span_head_name="qa")[0]
            torch.testing.assert_close(together[row, :n], alone[0], atol=2e-5, rtol=1e-4)


def test_classification_puts_global_attention_on_s_only(classification_data):
    task, model, _ = task_and_model(classification_data, "longformer_classification")
    net_input = batch(task, "valid", [0, 1, 2])["net_input"]
    mask = net_input["global_attention_mask"]
    assert mask[:, 0].all() and mask.sum() == 3
    assert net_input["src_tokens"][:, 0].eq(task.source_dictionary.bos()).all()
    task_none, _, _ = task_and_model(classification_data, "longformer_classification", "--global-attention", "none")
    assert "global_attention_mask" not in batch(task_none, "valid", [0, 1])["net_input"]


def test_global_classes_choose_the_pattern_and_none_overrides_them(qa_data):
    task, _, _ = task_and_model(qa_data, "longformer_qa", "--global-classes", "question")
    sample = batch(task, "valid", [0, 1])
    mask = sample["net_input"]["global_attention_mask"]
    for row, example in enumerate(sample["window_example"].tolist()):  # the question without <s>
        q_len = len(task.datasets["valid"].questions[example])
        assert mask[row].nonzero().flatten().tolist() == list(range(1, 1 + q_len))
    task_none, _, _ = task_and_model(qa_data, "longformer_qa", "--global-classes", "question",
                                     "--global-attention", "none")
    assert "global_attention_mask" not in batch(task_none, "valid", [0])["net_input"]


def test_unknown_global_class_is_refused_by_name(classification_data):
    with pytest.raises(ValueError, match="unknown token class 'questoin'"):
        task_and_model(classification_data, "longformer_classification", "--global-classes", "cls,questoin")
