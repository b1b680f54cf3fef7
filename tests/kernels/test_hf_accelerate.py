"""``longformer_kernels.hf.accelerate``: a transformers Longformer / LED with this package's
attention gives the stock model's outputs and gradients (random tiny models, padding, global
tokens 0 / 1 / many per row, per-layer windows), keeps its state dict, and LED still generates."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from longformer_kernels.hf import AcceleratedSelfAttention, accelerate, restore  # noqa: E402

TOL = 2e-5  # fp32


def _perturbed(model, seed):
    """Every weight moved off its init (zero biases would hide a bias mix-up)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model


def _longformer(window, layers=2, hidden=32, heads=4, seed=0, cls=None, labels=3):
    config = transformers.LongformerConfig(
        vocab_size=60, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * hidden, max_position_embeddings=300, attention_window=window,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, sep_token_id=2, num_labels=labels)
    torch.manual_seed(seed)
    return _perturbed((cls or transformers.LongformerForMaskedLM)(config), seed).eval()


def _batch(lengths, globals_per_row, vocab=60, seed=1):
    """input_ids with trailing padding (id 1), attention_mask, global_attention_mask or None."""
    gen = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.randint(4, vocab, (len(lengths), n), generator=gen)
    attention = torch.zeros(len(lengths), n, dtype=torch.long)
    for b, length in enumerate(lengths):
        attention[b, :length] = 1
        ids[b, length:] = 1
    glob = None
    if globals_per_row is not None:
        glob = torch.zeros_like(attention)
        for b, positions in enumerate(globals_per_row):
            glob[b, positions] = 1
    return ids, attention, glob


def _outputs_and_grads(model, ids, attention, glob, weights):
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=attention, global_attention_mask=glob).logits
    (out * weights).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads


CASES = {  # attention_window (HF two-sided, per layer), lengths, global positions per row
    "one-window-no-global": ([8, 8], [37, 37], None),
    "per-layer-padding-global-0-1-many": ([4, 8, 16], [50, 23, 41], [[], [0], [0, 5, 9, 30, 40]]),
    "window-wider-than-input": ([64, 64], [19, 7], [[3], [0, 6]]),
    "global-next-to-padding": ([4, 12], [30, 12], [[29], [11, 0]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_longformer_matches_stock_outputs_and_gradients(name):
    window, lengths, globals_per_row = CASES[name]
    stock = _longformer(window, layers=len(window))
    fast = accelerate(copy.deepcopy(stock), impl="torch")
    assert sum(isinstance(m, AcceleratedSelfAttention) for m in fast.modules()) == len(window)
    ids, attention, glob = _batch(lengths, globals_per_row)
    weights = torch.randn(*ids.shape, 60, generator=torch.Generator().manual_seed(2))
    keep = attention.bool()
    out_a, grads_a = _outputs_and_grads(stock, ids, attention, glob, weights)
    out_b, grads_b = _outputs_and_grads(fast, ids, attention, glob, weights)
    assert (out_a - out_b)[keep].abs().max() < TOL
    assert set(grads_a) == set(grads_b)
    # absolute floor: the key biases' gradients are zero up to rounding on both sides (a key bias
    # shifts a whole row of scores), so a relative test alone would compare noise with noise
    bad = [k for k in grads_a if not torch.allclose(grads_b[k], grads_a[k], rtol=1e-4, atol=1e-4)]
    assert not bad, [(k, (grads_a[k] - grads_b[k]).abs().max().item()) for k in bad]
    if globals_per_row is not None and any(globals_per_row):  # the global projections got gradients
        assert grads_b["longformer.encoder.layer.0.attention.self.query_global.weight"].abs().max() > 0


def test_classification_and_qa_heads_and_batch_of_one():
    for cls, seed, labels in ((transformers.LongformerForSequenceClassification, 3, 3),
                              (transformers.LongformerForQuestionAnswering, 4, 2)):
        stock = _longformer([8, 8], seed=seed, cls=cls, labels=labels)
        fast = accelerate(copy.deepcopy(stock))  # auto: the PyTorch path on CPU
        ids = torch.randint(4, 60, (1, 45), generator=torch.Generator().manual_seed(seed))
        ids[0, 0], ids[0, 5:7] = 0, 2  # <s> q </s></s> context: QA's default global mask needs the separators
        ids[0, 44] = 2
        with torch.no_grad():
            a, b = stock(input_ids=ids), fast(input_ids=ids)  # transformers' default global tokens
        for key in a.keys():
            assert (a[key] - b[key]).abs().max() < TOL, key


def test_state_dict_save_and_load_unchanged(tmp_path):
    stock = _longformer([4, 8])
    fast = accelerate(copy.deepcopy(stock))
    assert list(fast.state_dict()) == list(stock.state_dict())
    fast.save_pretrained(tmp_path / "m")
    again = transformers.LongformerForMaskedLM.from_pretrained(tmp_path / "m").eval()
    assert not any(isinstance(m, AcceleratedSelfAttention) for m in again.modules())
    for key, value in stock.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key
    ids, attention, glob = _batch([20], [[0]])
    with torch.no_grad():  # output_attentions runs the stock module, same weights
        out = fast(input_ids=ids, attention_mask=attention, global_attention_mask=glob, output_attentions=True)
        ref = stock(input_ids=ids, attention_mask=attention, global_attention_mask=glob, output_attentions=True)
    assert torch.equal(out.logits, ref.logits) and out.attentions[0].shape == ref.attentions[0].shape
    restore(fast)
    assert not any(isinstance(m, AcceleratedSelfAttention) for m in fast.modules())
    with pytest.raises(ValueError, match="LongformerSelfAttention"):
        accelerate(torch.nn.Linear(2, 2))


def test_led_encoder_and_generation_match_stock():
    config = transformers.LEDConfig(
        vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_encoder_position_embeddings=256,
        max_decoder_position_embeddings=64, attention_window=[8, 16], dropout=0.0, attention_dropout=0.0,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(5)
    stock = _perturbed(transformers.LEDForConditionalGeneration(config), 5).eval()
    fast = accelerate(copy.deepcopy(stock))
    ids, attention, glob = _batch([70, 41], [[0], [0, 3, 17]])
    with torch.no_grad():
        a = stock.get_encoder()(input_ids=ids, attention_mask=attention, global_attention_mask=glob)
        b = fast.get_encoder()(input_ids=ids, attention_mask=attention, global_attention_mask=glob)
        keep = attention.bool()
        assert (a.last_hidden_state - b.last_hidden_state)[keep].abs().max() < TOL
        kwargs = dict(input_ids=ids, attention_mask=attention, global_attention_mask=glob, max_new_tokens=8,
                      num_beams=2, do_sample=False)
        assert torch.equal(stock.generate(**kwargs), fast.generate(**kwargs))
