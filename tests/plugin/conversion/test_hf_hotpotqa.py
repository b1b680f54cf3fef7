"""A HotpotQA checkpoint at the Hugging Face boundary: its head has no transformers class, so an
export with it is refused in one line (exit 2, nothing written) that names --encoder-only; with
--encoder-only the encoder exports and transformers' LongformerModel gives our features."""
import pytest
import torch

from fairseq_longformer.cli import export_hf as export_cli
from fairseq_longformer.conversion.hf_export import export_model
from fairseq_longformer.models.heads import LongformerCandidateHead
from tests.plugin.conversion.test_hf import _perturbed
from tests.plugin.conversion.test_hf_heads import write_checkpoint
from tests.support.finetune_models import task_and_model
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)

transformers = pytest.importorskip("transformers")


@pytest.fixture
def hotpotqa_checkpoint(hotpotqa_data, tmp_path):  # noqa: F811
    task, model, args = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    path = tmp_path / "checkpoint.pt"
    write_checkpoint(_perturbed(model, 3), args, path)
    return path, task, model


def _refused(argv, capsys, out) -> str:
    assert export_cli.main(argv) == 2
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))  # no folder, no temporary
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error
    return error


@pytest.mark.parametrize("named", [False, True])
def test_hotpotqa_head_is_refused_naming_the_encoder_export(hotpotqa_checkpoint, tmp_path, capsys, named):
    path, _, _ = hotpotqa_checkpoint
    out = tmp_path / "hf"
    error = _refused([str(path), str(out)] + (["--head-name", "hotpotqa"] if named else []), capsys, out)
    assert "head 'hotpotqa' is a HotpotQA head" in error and "no transformers class" in error
    assert "--encoder-only" in error and error.startswith("longformer-export-hf: error: ")


def test_encoder_only_exports_the_encoder(hotpotqa_checkpoint, tmp_path):
    path, task, model = hotpotqa_checkpoint
    out = tmp_path / "hf"
    assert export_cli.main([str(path), str(out), "--encoder-only"]) == 0
    encoder = transformers.LongformerModel.from_pretrained(out).eval()
    assert encoder.config.architectures == ["LongformerForMaskedLM"]
    assert encoder.config.vocab_size == len(task.source_dictionary)  # the markers' rows came along
    d = task.source_dictionary
    tokens = torch.tensor([[d.bos(), d.index("[q]"), *range(10, 20), d.index("[/q]"), d.index("<t>"), 30, d.eos()]])
    with torch.no_grad():
        ours = model.encoder(tokens, features_only=True)[0]
        theirs = encoder(input_ids=tokens).last_hidden_state
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)
    assert export_cli.main([str(path), str(tmp_path / "other"), "--encoder-only", "--head-name", "hotpotqa"]) == 2


def test_built_models_with_such_heads_are_refused(hotpotqa_checkpoint, tmp_path):
    _, task, model = hotpotqa_checkpoint
    with pytest.raises(ValueError, match="HotpotQA head .* --encoder-only"):
        export_model(model, task.source_dictionary, tmp_path / "hf")
    model.span_heads["wikihop"] = LongformerCandidateHead(model.args.encoder_embed_dim)
    with pytest.raises(ValueError, match="WikiHop candidate head"):
        export_model(model, task.source_dictionary, tmp_path / "hf", head_name="wikihop")
    assert not (tmp_path / "hf").exists()
