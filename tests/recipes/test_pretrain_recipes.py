"""recipes/: the tokens-per-update arithmetic of every launcher (parsed from DRY_RUN=1 output),
the paper's settings, loud errors for bad settings, the command parses with fairseq-train's own
parser, and a real single-node run on CPU: first launch loads the "RoBERTa" checkpoint with
everything else reset, a second launch of the same command resumes instead."""
import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO, TINY_MODEL_ARGS
from tests.support.training import (dry_run, fake_gpus, launcher_flag, recipe, split_command, subprocess_env,
                                    train_inner)

TOKENS_PER_UPDATE = 2**18


@pytest.fixture
def inputs(tmp_path):
    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.txt").write_text("hello 1\n")
    ckpt = tmp_path / "roberta.base.4096.pt"
    ckpt.write_bytes(b"")
    return {"DATA": str(data), "ROBERTA_CKPT": str(ckpt), "SAVE_DIR": str(tmp_path / "save")}


@pytest.mark.parametrize("launcher,nnodes,gpus_per_node,batch,expected_update_freq", [
    ("single_node", 1, 1, 1, 64),
    ("single_node", 1, 8, 1, 8),
    ("single_node", 1, 8, 2, 4),
    ("torchrun", 1, 1, 1, 64),
    ("torchrun", 1, 8, 1, 8),
    ("torchrun", 8, 8, 1, 1),
    ("slurm", 1, 1, 1, 64),
    ("slurm", 1, 8, 1, 8),
    ("slurm", 8, 8, 1, 1),
])
@pytest.mark.parametrize("model", ["base", "large"])
def test_tokens_per_update_is_2_to_the_18(inputs, launcher, nnodes, gpus_per_node, batch,
                                          expected_update_freq, model):
    env = {**inputs, "MODEL": model, "GPUS_PER_NODE": gpus_per_node, "BATCH_PER_GPU": batch}
    if launcher != "single_node":
        env["NNODES"] = nnodes
    launch, _, flags = split_command(dry_run(launcher, env))
    world = int(flags["--distributed-world-size"])
    assert world == nnodes * gpus_per_node
    if launcher != "single_node":  # the launcher starts exactly that many processes
        assert int(launcher_flag(launch, "--nnodes")) * int(launcher_flag(launch, "--nproc_per_node")) == world
        assert launcher_flag(launch, "--rdzv-backend") == "c10d"
    tokens = (int(flags["--tokens-per-sample"]) * int(flags["--batch-size"]) * world
              * int(flags["--update-freq"]))
    assert tokens == TOKENS_PER_UPDATE
    assert int(flags["--update-freq"]) == expected_update_freq
    assert flags["--arch"] == f"longformer_{model}"


@pytest.mark.parametrize("env,message", [
    ({"GPUS_PER_NODE": 3}, "not divisible"),
    ({"GPUS_PER_NODE": 8, "BATCH_PER_GPU": 16}, "not divisible"),
    ({"TOKENS_PER_SAMPLE": 3000}, "not a multiple"),
    ({"BATCH_PER_GPU": 0}, "BATCH_PER_GPU=0"),
    ({"MODEL": "huge"}, "MODEL=huge"),
    ({"PRECISION": "fp8"}, "PRECISION=fp8"),
    ({"ROBERTA_CKPT": "/nonexistent/roberta.pt"}, "no such file"),
    ({"ROBERTA_CKPT": ""}, "ROBERTA_CKPT is not set"),
    ({"DATA": "/nonexistent"}, "no dict.txt"),
])
def test_bad_settings_stop_with_an_error(inputs, env, message):
    proc = recipe("single_node", {"DRY_RUN": "1", "GPUS_PER_NODE": 1, **inputs, **env})
    assert proc.returncode != 0
    assert message in proc.stderr
    assert proc.stdout == ""


def test_the_papers_settings(inputs, tmp_path):
    # on the paper's V100s (compute capability 7.0) the automatic precision is its fp16
    _, _, flags = split_command(dry_run("torchrun", {**inputs, "NNODES": 8, "GPUS_PER_NODE": 8,
                                                     **fake_gpus(tmp_path, ["7.0"] * 8)}))
    assert flags["--finetune-from-model"] == inputs["ROBERTA_CKPT"]
    assert "--restore-file" not in flags  # the same command must resume: see recipes/README.md
    assert float(flags["--lr"]) == 3e-5
    assert flags["--lr-scheduler"] == "polynomial_decay" and float(flags["--power"]) == 3
    assert int(flags["--warmup-updates"]) == 500
    assert int(flags["--total-num-update"]) == int(flags["--max-update"]) == 65000
    assert flags["--optimizer"] == "adam" and flags["--adam-betas"] == "(0.9,0.98)"
    assert float(flags["--adam-eps"]) == 1e-6 and float(flags["--weight-decay"]) == 0.01
    assert int(flags["--tokens-per-sample"]) == int(flags["--max-positions"]) == 4096
    assert int(flags["--attention-window"]) == 256  # one-sided: the paper's 512
    assert flags["--fp16"] is True and flags["--checkpoint-activations"] is True
    assert flags["--ddp-backend"] == "pytorch_ddp"
    assert "--find-unused-parameters" not in flags


def test_precision_and_checkpointing_switches(inputs):
    base = {**inputs, "GPUS_PER_NODE": 1}
    _, _, flags = split_command(dry_run("single_node", {**base, "PRECISION": "fp32", "CHECKPOINT_ACTIVATIONS": 0}))
    assert not {"--fp16", "--bf16", "--memory-efficient-fp16", "--checkpoint-activations"} & set(flags)
    _, _, flags = split_command(dry_run("single_node", {**base, "PRECISION": "memory-efficient-fp16"}))
    assert flags["--memory-efficient-fp16"] is True and "--fp16" not in flags
    _, _, flags = split_command(dry_run("single_node", {**base, "PRECISION": "bf16"}))
    assert flags["--bf16"] is True and not {"--fp16", "--memory-efficient-fp16", "--tpu"} & set(flags)
    _, _, flags = split_command(dry_run("single_node", {**base, "PRECISION": "memory-efficient-bf16"}))
    assert flags["--memory-efficient-bf16"] is True and not {"--bf16", "--fp16", "--tpu"} & set(flags)


@pytest.mark.parametrize("capabilities,expected", [
    (["8.0"] * 8, "--bf16"),         # A100
    (["9.0"], "--bf16"),             # H100
    (["7.0", "7.0"], "--fp16"),      # V100: no bf16 tensor cores
    (["8.6", "7.5"], "--fp16"),      # mixed node: the oldest GPU decides
    (None, "--fp16"),                # nvidia-smi fails (no driver here): the paper's fp16
])
def test_automatic_precision_follows_the_gpus_compute_capability(inputs, tmp_path, capabilities, expected):
    proc = recipe("single_node", {"DRY_RUN": "1", "GPUS_PER_NODE": 1, **inputs, **fake_gpus(tmp_path, capabilities)})
    assert proc.returncode == 0, proc.stderr
    _, _, flags = split_command(shlex.split(proc.stdout))
    precision = {"--bf16", "--fp16", "--memory-efficient-fp16", "--memory-efficient-bf16"} & set(flags)
    assert precision == {expected}
    assert f"precision: {expected[2:]}" in proc.stderr


def test_slurm_launcher_runs_one_torchrun_per_node(inputs):
    launch, _, _ = split_command(dry_run("slurm", {**inputs, "NNODES": 4, "GPUS_PER_NODE": 8,
                                                   "MASTER_PORT": 29999}))
    assert launch[0] == "srun" and launcher_flag(launch, "--ntasks-per-node") == "1"
    assert launcher_flag(launch, "--nodes") == "4"
    torchrun = next(i for i, a in enumerate(launch) if a.endswith("torchrun"))
    assert torchrun > launch.index("--ntasks-per-node")  # srun starts one torchrun per node
    assert launcher_flag(launch, "--rdzv-endpoint").endswith(":29999")


_PARSE = r"""
import json, sys
from fairseq import options
results = []
for argv in json.loads(sys.argv[1]):  # one process for all commands: fairseq imports are slow
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=argv)
    results.append({k: getattr(args, k, None) for k in (
        "arch", "lr", "update_freq", "fp16", "checkpoint_activations", "distributed_world_size")})
print(json.dumps(results))
"""


def test_fairseq_train_accepts_every_flag_of_the_recipe(inputs, tmp_path):
    """fairseq-train's own argparse (with the plugin's add_args) must take the command as is."""
    v100 = fake_gpus(tmp_path, ["7.0"] * 8)
    commands = [split_command(dry_run("single_node", {**inputs, "MODEL": model, "GPUS_PER_NODE": 8, **v100}))[1]
                for model in ("base", "large")]
    proc = subprocess.run([sys.executable, "-c", _PARSE, json.dumps(commands)], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, (
        "fairseq-train rejects the recipe's command (fairseq's RoBERTa add_args, which the model "
        "extends, does not declare --checkpoint-activations / --offload-activations: "
        "LongformerModel.add_args must):\n" + proc.stderr[-600:])
    for model, args in zip(("base", "large"), json.loads(proc.stdout.strip().splitlines()[-1])):
        assert args["arch"] == f"longformer_{model}" and args["update_freq"] == [8]
        assert args["fp16"] is True and args["checkpoint_activations"] is True
        assert args["distributed_world_size"] == 8 and args["lr"] == [3e-5]


def test_single_node_recipe_trains_then_resumes_with_the_same_command(kjv_data_bin, tiny_checkpoint, tmp_path):
    """CPU, the tiny model: settings only through the documented environment variables."""
    model_flags = TINY_MODEL_ARGS[TINY_MODEL_ARGS.index("--encoder-layers"):TINY_MODEL_ARGS.index("--attention-window")]
    env = {
        "DATA": kjv_data_bin, "ROBERTA_CKPT": tiny_checkpoint, "SAVE_DIR": tmp_path / "save",
        "GPUS_PER_NODE": 1, "PRECISION": "fp32", "CHECKPOINT_ACTIVATIONS": 0,
        "TOKENS_PER_SAMPLE": 128, "TOKENS_PER_UPDATE": 1024, "BATCH_PER_GPU": 4,  # update-freq 2
        "ATTENTION_WINDOW": 16, "MAX_UPDATE": 4, "WARMUP_UPDATES": 1, "LR": "1e-3", "DROPOUT": 0,
        "SAVE_INTERVAL_UPDATES": 2, "LOG_INTERVAL": 1, "NUM_WORKERS": 0,
        "EXTRA_ARGS": " ".join([*model_flags, "--cpu", "--disable-validation"]),
    }
    # first launch, stopped after 2 of the 4 updates (--max-update given last wins in argparse)
    first = recipe("single_node", {**env, "EXTRA_ARGS": env["EXTRA_ARGS"] + " --max-update 2"}, timeout=240)
    assert first.returncode == 0, first.stderr[-3000:]
    log = first.stdout + first.stderr
    assert "update-freq 2 = 1024" in log
    assert f"loading pretrained model from {tiny_checkpoint}" in log
    assert re.search(rf"Loaded checkpoint {re.escape(str(tiny_checkpoint))} \(epoch 1 @ 0 updates\)", log)
    assert sorted(train_inner(log)) == [1, 2]
    assert train_inner(log)[1]["iterations_in_epoch"] == 242  # 1,933 blocks / (4 x 2)

    second = recipe("single_node", env, timeout=240)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stdout + second.stderr
    assert "resuming from" in log and "loading pretrained model" not in log
    assert re.search(r"Loaded checkpoint \S+/save/checkpoint_last\.pt \(epoch 1 @ 2 updates\)", log)
    assert sorted(train_inner(log)) == [3, 4]
