"""fairseq's published-era checkpoints are data: RoBERTa (July 2019), XLM-R and BART (November
2019) and fairseq 0.12 layouts, built with each era's module paths and attribute layouts
(tests/support/published_checkpoints.py), load without --trust-checkpoint, convert, restore and
export; the same layouts with a payload hidden among the meters are refused and run nothing.

The reference for what a checkpoint holds is Python's own unpickling of the same bytes with the
era's classes present (``weights_only=False``): the stand-ins must hold exactly those attributes
and values.
"""
import collections
import contextlib
import io
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fairseq_longformer  # noqa: F401  (applies the patches)
from fairseq_longformer.runtime import checkpoint_types
from fairseq_longformer.runtime.checkpoints import UntrustedCheckpointError, load_checkpoint
from fairseq_longformer.cli import convert_bart, convert_roberta, export_hf, train
from tests.plugin.test_checkpoints import RunsCode
from tests.support.published_checkpoints import (
    METERS_0_12, METERS_2019, POSITIONS, TINY, TINY_BART, TRAIN_METERS, era_module, meter, published_era_checkpoints,
    roberta_args, save_2019,
)

FAMILY = {"roberta_2019": "roberta", "xlmr_2019": "roberta", "roberta_0_12": "roberta", "bart_2019": "bart",
          "bart_0_12": "bart"}
EMBEDDINGS = {"roberta": ("decoder.sentence_encoder.embed_tokens.weight", "encoder.sentence_encoder.embed_tokens.weight",
                          "longformer.embeddings.word_embeddings.weight"),
              "bart": ("encoder.embed_tokens.weight", "encoder.embed_tokens.weight", "led.shared.weight")}


@pytest.fixture(scope="module")
def era(kjv_data_bin, tmp_path_factory):
    return published_era_checkpoints(kjv_data_bin, tmp_path_factory.mktemp("era"))


def run_cli(main, argv, capsys):
    """(exit status, stderr) of a console script's main, in-process."""
    code = main(argv)
    return code, capsys.readouterr().err


def reference_load(path: Path, era_meters):
    """Python's own unpickling of ``path`` with the era's meter classes present."""
    module, layout = era_meters
    with era_module(module, layout):
        return torch.load(path, map_location="cpu", weights_only=False)


def same_values(ours, reference) -> bool:
    """Equal values and types, meters compared by their attributes, numpy by dtype and value."""
    if isinstance(reference, np.ndarray):
        return isinstance(ours, np.ndarray) and ours.dtype == reference.dtype and np.array_equal(ours, reference)
    if isinstance(reference, np.generic):
        return type(ours) is type(reference) and ours == reference
    if type(reference).__module__ in (METERS_2019[0], METERS_0_12[0]):
        return type(ours) is checkpoint_types.METERS[type(reference).__name__] and same_values(vars(ours), vars(reference))
    if isinstance(reference, checkpoint_types.InertObject):
        return type(ours) is type(reference) and same_values(vars(ours), vars(reference))
    if isinstance(reference, dict):
        return type(ours) is type(reference) and list(ours) == list(reference) and \
            all(same_values(ours[k], reference[k]) for k in reference)
    if isinstance(reference, (list, tuple)):
        return type(ours) is type(reference) and len(ours) == len(reference) and \
            all(same_values(a, b) for a, b in zip(ours, reference))
    if isinstance(reference, torch.Tensor):
        return torch.equal(ours, reference)
    return type(ours) is type(reference) and ours == reference


@pytest.mark.parametrize("name", ["roberta_2019", "bart_2019", "roberta_0_12"])
def test_meters_and_numpy_values_load_as_the_era_wrote_them(name, era):
    era_meters = METERS_2019 if name.endswith("2019") else METERS_0_12
    ours, reference = load_checkpoint(era[name]), reference_load(era[name], era_meters)
    assert same_values(ours["extra_state"], reference["extra_state"])
    assert vars(ours["args"] if ours.get("args") else ours["cfg"]["model"]) == \
        vars(reference["args"] if reference.get("args") else reference["cfg"]["model"])
    assert all(torch.equal(ours["model"][k], v) for k, v in reference["model"].items())
    if name.endswith("2019"):
        meters = ours["extra_state"]["train_meters"]
        assert type(meters) is collections.OrderedDict and list(meters) == list(TRAIN_METERS)
        assert not hasattr(meters["wps"], "avg")  # TimeMeter.avg is fairseq's code: the stand-in has none
    else:
        loss = ours["extra_state"]["metrics"]["valid"][0][3]
        assert loss["sum"].dtype == np.float32 and loss["sum"].tolist() == [0, 1, 2, 3]
        assert type(ours["extra_state"]["best"]) is np.float64
        grid = ours["extra_state"]["user_meters"]["grid"]
        assert grid.dtype == np.dtype("=i4") and grid.flags.f_contiguous and grid.tolist() == [[0, 1, 2], [3, 4, 5]]


def payloads(marker: Path):
    """Values hidden among a 2019 checkpoint's meters, each of which must be refused."""
    with era_module("fairseq.trainer", ["Trainer"]) as trainer:
        yield "os.system", RunsCode(marker), "posix.system"
        yield "a class outside the allowlist", meter(trainer["Trainer"], args=None), "fairseq.trainer.Trainer"
    yield "a numpy array of objects", np.array([RunsCode(marker)], dtype=object), "numeric dtypes"


def test_a_payload_in_the_same_layout_is_refused(kjv_data_bin, tmp_path, capsys, monkeypatch):
    marker = tmp_path / "ran"
    args = roberta_args(kjv_data_bin)
    for what, payload, named in payloads(marker):
        path = save_2019(tmp_path / "evil" / "model.pt", args, {"w": torch.zeros(1)}, "MaskedLmLoss",
                         with_shuffle=False, legacy_format=True, payload=payload)
        with pytest.raises(UntrustedCheckpointError) as refused:
            load_checkpoint(path)
        message = str(refused.value)
        assert "\n" not in message and str(path) in message and named in message and "--trust-checkpoint" in message, what
    # the CLIs, with the os.system payload: one line, nothing run, nothing written
    path = save_2019(tmp_path / "evil" / "model.pt", args, {"w": torch.zeros(1)}, "MaskedLmLoss", with_shuffle=False,
                     legacy_format=True, payload=RunsCode(marker))
    (path.parent / "dict.txt").write_bytes((kjv_data_bin / "dict.txt").read_bytes())
    code, err = run_cli(convert_roberta.main, ["--source", str(path.parent), "--output", str(tmp_path / "out")], capsys)
    assert code == 2 and "posix.system" in err and "\n" not in err.strip() and not (tmp_path / "out").exists()
    monkeypatch.setattr(sys, "argv", sys.argv[:])
    code, err = run_cli(train.main, restore_argv(kjv_data_bin, "roberta_2019", path, tmp_path / "save"), capsys)
    assert code == 2 and "posix.system" in err and "--trust-checkpoint" in err and "\n" not in err.strip()
    assert not marker.exists() and not any((tmp_path / "save").glob("*.pt"))


def restore_argv(data: Path, name: str, restore: Path, save: Path):
    """longformer-train flags that rebuild the tiny model of ``name`` and take one step at lr 0
    (the step changes no weight, so the saved model is the restored one)."""
    model = (["--task", "masked_lm", "--criterion", "masked_lm", "--arch", "roberta_base", *TINY,
              "--max-positions", str(POSITIONS)] if FAMILY[name] == "roberta" else
             ["--task", "denoising", "--criterion", "cross_entropy", "--arch", "bart_base", *TINY_BART,
              "--max-source-positions", str(POSITIONS), "--max-target-positions", str(POSITIONS)])
    return [str(data), *model, "--tokens-per-sample", str(POSITIONS), "--optimizer", "adam", "--lr", "0",
            "--batch-size", "2", "--max-update", "1", "--cpu", "--num-workers", "0", "--disable-validation",
            "--no-epoch-checkpoints", "--reset-optimizer", "--reset-dataloader", "--reset-meters",
            "--restore-file", str(restore), "--save-dir", str(save)]


@pytest.mark.parametrize("name", list(FAMILY))
def test_converts_restores_and_exports_with_no_flag(name, era, kjv_data_bin, tmp_path, capsys, monkeypatch):
    source_key, restored_key, hf_key = EMBEDDINGS[FAMILY[name]]
    expected = reference_load(era[name], METERS_2019 if name.endswith("2019") else METERS_0_12)["model"]
    embeddings = expected[source_key if name.endswith("2019") else restored_key]

    convert = convert_roberta.main if FAMILY[name] == "roberta" else convert_bart.main
    code, err = run_cli(convert, ["--source", str(era[name].parent), "--output", str(tmp_path / "fairseq"),
                                  "--max-positions", str(2 * POSITIONS), "--attention-window", "8"], capsys)
    assert code == 0, err
    code, err = run_cli(export_hf.main, [str(tmp_path / "fairseq" / "model.pt"), str(tmp_path / "hf")], capsys)
    assert code == 0, err
    from safetensors.torch import load_file

    assert torch.equal(load_file(str(tmp_path / "hf" / "model.safetensors"))[hf_key], embeddings)

    if name.startswith("bart_0"):
        return  # restoring BART is the 2019 layout's test; 0.12's is RoBERTa's
    monkeypatch.setattr(sys, "argv", sys.argv[:])  # longformer-train sets it
    with contextlib.redirect_stdout(io.StringIO()):
        train.main(restore_argv(kjv_data_bin, name, era[name], tmp_path / "save"))
    restored = torch.load(tmp_path / "save" / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert restored["optimizer_history"][-1]["num_updates"] == 1
    assert torch.equal(restored["model"][restored_key], embeddings)


def test_a_loaded_2019_checkpoint_survives_fairseq_s_ddp_broadcast(era):
    """Ranks other than 0 receive the restored state pickled again (``broadcast_object``): the
    stand-ins pickle under their own names and load back through the allowlist, as data."""
    from fairseq_longformer.runtime.checkpoints import fairseq_torch_load

    state = load_checkpoint(era["roberta_2019"])
    buffer = io.BytesIO()
    torch.save(state, buffer)
    received = fairseq_torch_load(io.BytesIO(buffer.getvalue()), map_location="cpu")
    assert same_values(received["extra_state"], state["extra_state"])
    assert type(received["extra_state"]["train_meters"]["wall"]) is checkpoint_types.TimeMeter


class Reduce:
    """Pickles as ``function(*args)``."""

    def __init__(self, function, args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


OURS = "fairseq_longformer.runtime.checkpoint_types\n"
# a stand-in reached the way a hostile file could (wrong arguments, no state): (value, renames)
MISSHAPEN = {
    "meter built with arguments": (Reduce(checkpoint_types.AverageMeter, (1, 2)),
                                   {"AverageMeter": "fairseq.meters\nAverageMeter"}),
    "dtype without a code": (Reduce(checkpoint_types.NumpyDtype, ()), {"NumpyDtype": "numpy\ndtype"}),
    "scalar with 3 arguments": (Reduce(checkpoint_types.numpy_scalar, (1, 2, 3)),
                                {"numpy_scalar": "numpy._core.multiarray\nscalar"}),
    "reconstruct of another type": (Reduce(checkpoint_types.numpy_reconstruct, (int,)),
                                    {"numpy_reconstruct": "numpy.core.multiarray\n_reconstruct"}),
    "array never filled": (Reduce(checkpoint_types.numpy_reconstruct, (checkpoint_types.NumpyArray, (0,), b"b")),
                           {"numpy_reconstruct": "numpy.core.multiarray\n_reconstruct", "NumpyArray": "numpy\nndarray"}),
}


@pytest.mark.parametrize("case", list(MISSHAPEN))
def test_a_misshapen_value_under_an_allowed_name_is_refused_in_one_line(case):
    """torch's legacy format (no checksum) lets the pickled names be rewritten in place: the
    stand-ins are reached under the names they answer, with what fairseq never wrote."""
    value, renames = MISSHAPEN[case]
    buffer = io.BytesIO()
    torch.save({"x": value}, buffer, _use_new_zipfile_serialization=False)
    data = buffer.getvalue()
    for ours, theirs in renames.items():
        data = data.replace((OURS + ours).encode(), theirs.encode())
    with pytest.raises(UntrustedCheckpointError, match="--trust-checkpoint") as refused:
        load_checkpoint(io.BytesIO(data))
    assert "\n" not in str(refused.value) and "more than plain data" in str(refused.value)
