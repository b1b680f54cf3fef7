"""fairseq_longformer.runtime.checkpoints: a checkpoint is data. A malicious pickle in a real fairseq
checkpoint runs in no command; --trust-checkpoint runs it; stock fairseq checkpoints (RoBERTa from
fairseq-train, BART, the DictConfig form DDP ranks receive) and the project's own still load.

The malicious file is a stock fairseq-train checkpoint with one more entry whose unpickling calls
``os.system`` to create a marker file: the marker exists exactly when its code ran.
"""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_longformer  # noqa: F401  (applies the patches)
from fairseq_longformer.runtime.checkpoints import UntrustedCheckpointError, fairseq_torch_load, load_checkpoint, trust_checkpoints
from tests.conftest import REPO
from tests.support.led_models import bart_dir, led_data_bin, led_dir  # noqa: F401  (fixtures: stock BART, its LED)

BIN = Path(sys.executable).parent
TINY_ROBERTA = ["--task", "masked_lm", "--criterion", "masked_lm", "--arch", "roberta_base", "--encoder-layers", "1",
                "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
                "--tokens-per-sample", "32", "--batch-size", "2", "--optimizer", "adam", "--lr", "1e-3", "--cpu",
                "--no-epoch-checkpoints", "--disable-validation", "--num-workers", "0"]


class RunsCode:
    """Unpickles as ``os.system("touch MARKER")``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def fairseq_train(data, save_dir, *extra, max_update=1):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([str(BIN / "fairseq-train"), str(data), "--user-dir", str(REPO / "fairseq_longformer"),
                           *TINY_ROBERTA, "--max-update", str(max_update), "--save-dir", str(save_dir), *map(str, extra)],
                          capture_output=True, text=True, env=env, cwd=save_dir.parent, timeout=300)


@pytest.fixture(scope="session")
def stock_roberta(kjv_data_bin, tmp_path_factory) -> Path:
    """checkpoint_last.pt of a 1-update fairseq-train run of the stock roberta_base arch (tiny)."""
    work = tmp_path_factory.mktemp("stock_roberta")
    result = fairseq_train(kjv_data_bin, work / "save")
    assert result.returncode == 0, result.stderr[-2000:]
    return work / "save" / "checkpoint_last.pt"


def poisoned(checkpoint: Path, folder: Path, marker: Path) -> Path:
    """``checkpoint`` with one entry more that runs code when unpickled, as folder/model.pt."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state["extra_state"]["payload"] = RunsCode(marker)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / "model.pt")
    return folder / "model.pt"


def test_the_allowlist_is_exactly_what_a_stock_checkpoint_needs(stock_roberta):
    needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(stock_roberta)))
    assert needed == {"argparse.Namespace"}  # what fairseq-train writes, checked on a real one
    state = load_checkpoint(stock_roberta)
    assert state["cfg"]["model"].arch == "roberta_base" and "encoder.sentence_encoder.embed_tokens.weight" in state["model"]


def test_malicious_checkpoint_is_refused_with_one_line_and_runs_with_trust(stock_roberta, tmp_path):
    marker = tmp_path / "ran"
    path = poisoned(stock_roberta, tmp_path / "evil", marker)
    with pytest.raises(UntrustedCheckpointError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "posix.system" in message
    assert "--trust-checkpoint" in message and "runs code from the file" in message
    assert not marker.exists()
    load_checkpoint(path, trust=True)
    assert marker.exists()  # the test's malicious file is real: trusted, its code runs


def test_ddp_broadcast_form_loads(stock_roberta):
    """Ranks other than 0 receive the checkpoint with its cfg as an omegaconf DictConfig."""
    from fairseq import checkpoint_utils
    from omegaconf import DictConfig

    state = checkpoint_utils.load_checkpoint_to_cpu(str(stock_roberta))  # through the allowlist
    assert isinstance(state["cfg"], DictConfig)
    buffer = io.BytesIO()
    torch.save(state, buffer)  # what broadcast_object sends
    received = fairseq_torch_load(io.BytesIO(buffer.getvalue()), map_location="cpu")
    assert isinstance(received["cfg"], DictConfig) and received["cfg"].model.arch == "roberta_base"


def test_stock_bart_and_the_project_s_own_checkpoints_load(bart_dir, led_dir, stock_roberta, tmp_path):  # noqa: F811
    from fairseq_longformer.conversion.fairseq_sources import convert_roberta_checkpoint

    assert load_checkpoint(bart_dir / "model.pt")["cfg"]["model"].arch == "bart_base"
    assert load_checkpoint(led_dir / "model.pt")["cfg"]["model"].arch.startswith("led")
    roberta = tmp_path / "roberta"
    roberta.mkdir()
    (roberta / "model.pt").write_bytes(stock_roberta.read_bytes())
    (roberta / "dict.txt").write_bytes(_dict_of(stock_roberta))
    result = convert_roberta_checkpoint(roberta, tmp_path / "longformer", max_positions=64, attention_window="8")
    assert load_checkpoint(result.checkpoint)["cfg"]["model"].arch.startswith("longformer")


def _dict_of(checkpoint: Path) -> bytes:
    data = load_checkpoint(checkpoint)["cfg"]["task"]["data"]
    return (Path(data) / "dict.txt").read_bytes()


def test_resume_and_restore_refuse_a_malicious_checkpoint_unless_trusted(stock_roberta, kjv_data_bin, tmp_path):
    marker = tmp_path / "ran"
    evil = poisoned(stock_roberta, tmp_path / "evil", marker)
    # --restore-file
    restore = fairseq_train(kjv_data_bin, tmp_path / "restore", "--restore-file", evil, max_update=2)
    # resume: the same command on a save dir whose checkpoint_last.pt is the malicious file
    (tmp_path / "resume").mkdir()
    (tmp_path / "resume" / "checkpoint_last.pt").write_bytes(evil.read_bytes())
    resume = fairseq_train(kjv_data_bin, tmp_path / "resume", max_update=2)
    for result in (restore, resume):
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert "error: " in result.stderr and "--trust-checkpoint" in result.stderr.splitlines()[-1]
    assert not marker.exists()
    assert sorted(p.name for p in (tmp_path / "resume").iterdir()) == ["checkpoint_last.pt"]

    trusted = fairseq_train(kjv_data_bin, tmp_path / "trusted", "--restore-file", evil, "--trust-checkpoint",
                            max_update=2)
    assert trusted.returncode == 0, trusted.stderr[-2000:]
    assert marker.exists()


def test_stock_checkpoint_resumes_through_the_allowlist(stock_roberta, kjv_data_bin, tmp_path):
    result = fairseq_train(kjv_data_bin, tmp_path / "save", "--restore-file", stock_roberta, max_update=2)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "num_updates 2" in result.stdout + result.stderr


def test_the_hub_interface_refuses_unless_trusted(stock_roberta, tmp_path):
    from fairseq.models.roberta import RobertaModel

    marker = tmp_path / "ran"
    evil = poisoned(stock_roberta, tmp_path / "evil", marker)
    data = Path(load_checkpoint(stock_roberta)["cfg"]["task"]["data"])
    with pytest.raises(UntrustedCheckpointError, match="--trust-checkpoint"):
        RobertaModel.from_pretrained(str(evil.parent), checkpoint_file="model.pt", data_name_or_path=str(data), bpe=None)
    assert not marker.exists()
    with trust_checkpoints(True):
        RobertaModel.from_pretrained(str(evil.parent), checkpoint_file="model.pt", data_name_or_path=str(data), bpe=None)
    assert marker.exists()


def test_longformer_hub_models_is_empty():
    from fairseq.models.roberta import RobertaModel

    from fairseq_longformer.models.longformer import LongformerModel

    assert RobertaModel.hub_models()  # the inherited map of plain-http downloads
    assert LongformerModel.hub_models() == {}


def test_a_hydra_era_checkpoint_loads(kjv_data_bin, tmp_path):
    """fairseq-hydra-train (the project's recipes/hydra yaml, shrunk) writes a checkpoint that
    needs no allowed type at all; it loads, and the same command resumes from it."""
    entry = tmp_path / "hydra_train.py"
    entry.write_text("import fairseq_longformer  # noqa: F401\nfrom fairseq_cli.hydra_train import cli_main\ncli_main()\n")
    save = tmp_path / "save"

    def hydra_train(updates):
        overrides = [f"task.data={kjv_data_bin}", "checkpoint.finetune_from_model=null", f"checkpoint.save_dir={save}",
                     f"common.user_dir={REPO / 'fairseq_longformer'}", "common.fp16=false", "common.cpu=true",
                     f"optimization.max_update={updates}", "optimization.update_freq=[1]", "dataset.batch_size=2",
                     "dataset.num_workers=0", "dataset.disable_validation=true", "task.tokens_per_sample=128",
                     "task.pad_to_multiple=16", "model.max_positions=128", "model.attention_window=16",
                     "+model.encoder_layers=1", "+model.encoder_embed_dim=32", "+model.encoder_ffn_embed_dim=64",
                     "+model.encoder_attention_heads=2", "checkpoint.no_epoch_checkpoints=true",
                     f"hydra.run.dir={tmp_path / 'hydra'}", "distributed_training.distributed_world_size=1"]
        return subprocess.run([sys.executable, str(entry), "--config-dir", str(REPO / "recipes" / "hydra"),
                               "--config-name", "longformer_base", *overrides], capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"), cwd=tmp_path, timeout=300)

    first = hydra_train(1)
    assert first.returncode == 0, first.stderr[-2000:]
    checkpoint = save / "checkpoint_last.pt"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(checkpoint)) == []
    assert load_checkpoint(checkpoint)["cfg"]["model"]["_name"] == "longformer_base"
    resumed = hydra_train(2)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr


@pytest.mark.parametrize("command", ["convert_roberta", "convert_bart", "export_hf"])
def test_trust_checkpoint_flag_of_the_converters_runs_the_file(command, stock_roberta, tmp_path, capsys):
    """The refusals are in tests/integration/test_bad_inputs.py; with the flag the code runs (the
    conversion itself may then fail: a RoBERTa is no BART), and without it again it does not."""
    import importlib

    main = importlib.import_module(f"fairseq_longformer.cli.{command}").main
    marker = tmp_path / "ran"
    evil = poisoned(stock_roberta, tmp_path / "evil", marker)
    (evil.parent / "dict.txt").write_bytes(_dict_of(stock_roberta))
    argv = [str(evil), str(tmp_path / "out")] if command == "export_hf" else ["--source", str(evil.parent), "--output", str(tmp_path / "out")]
    assert main(argv) != 0 and not marker.exists()
    main(argv + ["--trust-checkpoint"])
    assert marker.exists()
    marker.unlink()
    main(argv + ["--overwrite"])  # the trust of one call does not outlive it
    assert not marker.exists()
