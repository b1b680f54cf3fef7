"""``longformer-export-onnx``: the graph of each head and of the LED encoder, exported once, run
by onnxruntime at lengths 1, 97, 512, 1,025 and 4,096, batches 1-3 with padding, 0 / 1 / many
global tokens, against transformers' own PyTorch model (the stock one) within 1e-4 in fp32."""
import pytest
import torch

transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from fairseq_longformer.cli import export_onnx as export_onnx_cli  # noqa: E402
from fairseq_longformer.serving.onnx_export import export_onnx  # noqa: E402
from tests.plugin.conversion.test_hf import _perturbed  # noqa: E402

TOL = 1e-4
VOCAB, POSITIONS = 50, 4200


def _sizes():  # fairseq's layer-norm eps, so that the MLM also imports as a fairseq checkpoint
    return dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1, bos_token_id=0,
                eos_token_id=2, num_attention_heads=4, layer_norm_eps=1e-5)


def _longformer(cls, layers, windows, seed, **extra):
    config = transformers.LongformerConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, intermediate_size=64,
        max_position_embeddings=POSITIONS, attention_window=windows, sep_token_id=2, **_sizes(), **extra)
    torch.manual_seed(seed)
    return _perturbed(cls(config), seed)


def _led(seed):
    config = transformers.LEDConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_encoder_position_embeddings=POSITIONS,
        max_decoder_position_embeddings=64, attention_window=[8, 16], dropout=0.0, attention_dropout=0.0,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(seed)
    return _perturbed(transformers.LEDForConditionalGeneration(config), seed)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{part: (stock transformers model, onnxruntime session)}, each exported once from a HF folder
    (the MLM through the console script's main)."""
    root = tmp_path_factory.mktemp("onnx")
    models = {
        "encoder_mlm": _longformer(transformers.LongformerForMaskedLM, 2, [8, 16], 1),  # w = 4, 8: per layer
        "encoder_classification": _longformer(transformers.LongformerForSequenceClassification, 1, [8], 2,
                                              num_labels=3),
        "encoder_qa": _longformer(transformers.LongformerForQuestionAnswering, 1, [8], 3),
        "led_encoder": _led(4),
    }
    parts = {}
    for part, model in models.items():
        model.save_pretrained(root / part)
        if part == "encoder_mlm":
            assert export_onnx_cli.main([str(root / part), str(root / f"{part}_onnx")]) == 0
        else:
            export_onnx(root / part, root / f"{part}_onnx")
        path = root / f"{part}_onnx" / f"{part}.onnx"
        graph = onnx.load(str(path))
        assert graph.opset_import[0].version >= 17
        assert not any("strided" in node.op_type.lower() for node in graph.graph.node)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        parts[part] = (model, ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]))
    return parts


def _batch(lengths, globals_per_row, seed):
    gen = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.randint(4, VOCAB, (len(lengths), n), generator=gen)
    attention = torch.zeros(len(lengths), n, dtype=torch.long)
    glob = torch.zeros_like(attention)
    for b, length in enumerate(lengths):
        attention[b, :length] = 1
        ids[b, length:] = 1
        glob[b, globals_per_row[b]] = 1
    ids[:, 0] = 0
    return ids, attention, glob


def _stock(part, model, ids, attention, glob):
    with torch.no_grad():
        if part == "led_encoder":
            return [model.get_encoder()(input_ids=ids, attention_mask=attention,
                                        global_attention_mask=glob).last_hidden_state]
        out = model(input_ids=ids, attention_mask=attention, global_attention_mask=glob)
        if part == "encoder_qa":
            return [out.start_logits, out.end_logits]
        return [out.logits]


# (lengths per row, global positions per row): batches 1-3, padding, 0 / 1 / many global tokens
CASES = {
    "1": ([1], [[]]),
    "97-batch3": ([97, 60, 13], [[0], [], [0, 1, 2, 7, 12]]),
    "512-batch2": ([512, 300], [list(range(0, 512, 37)), [299]]),
    "1025": ([1025], [[0, 1024]]),
    "4096": ([4096], [[0, 5, 2000, 4095]]),
}
PART_CASES = {"encoder_mlm": list(CASES), "led_encoder": list(CASES),
              "encoder_classification": ["1", "97-batch3", "1025"], "encoder_qa": ["97-batch3", "512-batch2"]}


@pytest.mark.parametrize("part,case", [(p, c) for p, cases in PART_CASES.items() for c in cases])
def test_onnxruntime_matches_pytorch(exported, part, case):
    model, session = exported[part]
    lengths, globals_per_row = CASES[case]
    ids, attention, glob = _batch(lengths, globals_per_row, seed=len(lengths) * 100 + max(lengths))
    feed = {"input_ids": ids.numpy(), "attention_mask": attention.numpy(), "global_attention_mask": glob.numpy()}
    outputs = session.run(None, feed)
    for ours, reference in zip(outputs, _stock(part, model, ids, attention, glob)):
        ours = torch.from_numpy(ours)
        assert ours.shape == reference.shape
        if part == "encoder_classification":  # one row per sequence
            diff = (ours - reference).abs().max().item()
        else:  # outputs at padding positions mean nothing on either side
            diff = (ours - reference)[attention.bool()].abs().max().item()
        assert diff < TOL, (part, case, diff)


@pytest.mark.parametrize("part", ["encoder_mlm", "led_encoder"])
def test_attention_mask_2_is_global_as_in_transformers(exported, part):
    """attention_mask = 2 marks a global token in transformers' LongformerModel / LEDEncoder (and
    the original Longformer API): the graph gives transformers' outputs for it, with and without a
    global_attention_mask beside it, and not those of a local token."""
    model, session = exported[part]
    ids, attention, glob = _batch([97, 60], [[], [3]], seed=7)
    attention[0, [0, 40]] = 2  # global through attention_mask alone; row 1 keeps global_attention_mask
    attention[1, 5] = 2  # both ways at once
    feed = {"input_ids": ids.numpy(), "attention_mask": attention.numpy(), "global_attention_mask": glob.numpy()}
    ours = torch.from_numpy(session.run(None, feed)[0])
    reference = _stock(part, model, ids, attention, glob)[0]
    as_local = _stock(part, model, ids, attention.clamp(max=1), glob)[0]
    valid = attention.bool()
    assert (ours - reference)[valid].abs().max() < TOL
    assert (as_local - reference)[valid].abs().max() > 100 * TOL  # the case tells global from local


def test_from_a_fairseq_checkpoint_and_refusals(exported, tmp_path, capsys):
    """A fairseq checkpoint (imported from the MLM's folder) exports to the same graph; a folder
    that is not a Longformer or LED is refused in one line, nothing written."""
    from fairseq_longformer.conversion.hf_import import import_hf

    model, _ = exported["encoder_mlm"]
    model.save_pretrained(tmp_path / "hf")
    result = import_hf(tmp_path / "hf", tmp_path / "fs")
    export_onnx(result.checkpoint, tmp_path / "onnx")
    session = ort.InferenceSession(str(tmp_path / "onnx" / "encoder_mlm.onnx"), providers=["CPUExecutionProvider"])
    ids, attention, glob = _batch(*CASES["97-batch3"], seed=5)
    ours = session.run(None, {"input_ids": ids.numpy(), "attention_mask": attention.numpy(),
                              "global_attention_mask": glob.numpy()})[0]
    reference = _stock("encoder_mlm", model, ids, attention, glob)[0]
    assert (torch.from_numpy(ours) - reference)[attention.bool()].abs().max() < TOL

    transformers.RobertaForMaskedLM(transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    ).save_pretrained(tmp_path / "roberta")
    capsys.readouterr()
    assert export_onnx_cli.main([str(tmp_path / "roberta"), str(tmp_path / "refused")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("longformer-export-onnx")]
    assert len(err) == 1 and "RobertaForMaskedLM" in err[0] and not (tmp_path / "refused").exists()
