"""recipes/hydra/*.yaml: they compose as fairseq-hydra-train composes them (validated against
fairseq's config schema), hold the shell recipe's settings, and train: two processes (gloo)
with activation checkpointing on, the loss equal to one process over the same global batch."""
import json
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.training import (
    REFERENCE_UPDATES, RECIPES, TORCHRUN, assert_same_curve, devices_trained_on, dry_run, fake_gpus, free_port,
    run_logged, split_command, subprocess_env, train_inner,
)

HYDRA_DIR = RECIPES / "hydra"

# What fairseq-hydra-train does before training: register fairseq's schema under the config's
# name, compose, fill in the registered components' defaults. One process composes every config
# the tests need (fairseq imports are slow); a config that fails gives its error message.
_COMPOSE = r"""
import json, sys
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import fairseq_longformer  # noqa: F401  (registers task/model/criterion)
from fairseq.dataclass.initialize import add_defaults, hydra_init

results = {}
for label, config_dir, name, overrides in json.loads(sys.argv[1]):
    try:
        hydra_init(name)
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name=name, overrides=overrides)
        add_defaults(cfg)
        results[label] = OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:
        results[label] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(results, default=str))
"""
OVERRIDES = ["task.data=/data", "checkpoint.finetune_from_model=/roberta.pt"]


def hydra_launch(tmp_path, capabilities) -> list:
    """The overrides recipes/pretrain_hydra.sh passes (DRY_RUN=1, PRECISION=auto) on GPUs of these
    compute capabilities, after its --config-name."""
    argv = dry_run("hydra", {"DATA": "/data", "ROBERTA_CKPT": "/roberta.pt", "PRECISION": "auto",
                             **fake_gpus(tmp_path, capabilities)})
    assert argv[argv.index("--config-dir") + 1] == str(HYDRA_DIR)
    return argv[argv.index("--config-name") + 2:]


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """The composed configs: longformer_base, longformer_large, "typo" (the base yaml with an
    unknown key added, which must not compose), and the base yaml with the overrides
    recipes/pretrain_hydra.sh passes on an H100 ("launch_sm90") and on a V100 ("launch_sm70")."""
    text = (HYDRA_DIR / "longformer_base.yaml").read_text()
    assert "  clip_norm: 0\n" in text
    typo_dir = tmp_path_factory.mktemp("typo")
    (typo_dir / "typo.yaml").write_text(text.replace("  clip_norm: 0\n", "  clip_norm: 0\n  lrr: [1]\n"))
    jobs = [["longformer_base", str(HYDRA_DIR), "longformer_base", OVERRIDES],
            ["longformer_large", str(HYDRA_DIR), "longformer_large", OVERRIDES],
            ["typo", str(typo_dir), "typo", OVERRIDES]]
    for capability in ("9.0", "7.0"):
        launch = hydra_launch(tmp_path_factory.mktemp("gpus"), [capability])
        jobs.append([f"launch_sm{capability.replace('.', '')}", str(HYDRA_DIR), "longformer_base", launch])
    proc = subprocess.run([sys.executable, "-c", _COMPOSE, json.dumps(jobs)], capture_output=True,
                          text=True, timeout=180, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model", ["base", "large"])
def test_hydra_config_has_the_shell_recipes_settings(composed, tmp_path, model):
    cfg = composed[f"longformer_{model}"]
    assert "error" not in cfg, cfg.get("error")
    data = tmp_path / "data"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    (tmp_path / "roberta.pt").write_bytes(b"")
    world = cfg["distributed_training"]["distributed_world_size"]
    _, _, flags = split_command(dry_run("single_node", {
        "MODEL": model, "GPUS_PER_NODE": world, "DATA": data, "ROBERTA_CKPT": tmp_path / "roberta.pt",
        "PRECISION": "fp16"}))  # the yaml's own; recipes/pretrain_hydra.sh sets it from PRECISION (below)

    tokens = (cfg["task"]["tokens_per_sample"] * cfg["dataset"]["batch_size"] * world
              * cfg["optimization"]["update_freq"][0])
    assert tokens == 2**18
    assert cfg["model"]["_name"] == flags["--arch"] == f"longformer_{model}"
    assert cfg["optimization"]["update_freq"] == [int(flags["--update-freq"])]
    assert cfg["dataset"]["batch_size"] == int(flags["--batch-size"])
    assert cfg["optimization"]["lr"] == [float(flags["--lr"])]
    assert cfg["optimization"]["max_update"] == int(flags["--max-update"])
    assert cfg["optimization"]["clip_norm"] == float(flags["--clip-norm"])
    assert cfg["optimizer"]["_name"] == flags["--optimizer"]
    assert cfg["optimizer"]["adam_betas"] == flags["--adam-betas"]
    assert cfg["optimizer"]["adam_eps"] == float(flags["--adam-eps"])
    assert cfg["optimizer"]["weight_decay"] == float(flags["--weight-decay"])
    assert cfg["lr_scheduler"]["_name"] == flags["--lr-scheduler"]
    assert cfg["lr_scheduler"]["warmup_updates"] == int(flags["--warmup-updates"])
    assert cfg["lr_scheduler"]["total_num_update"] == float(flags["--total-num-update"])
    assert cfg["lr_scheduler"]["power"] == float(flags["--power"])
    assert cfg["task"]["_name"] == flags["--task"] and cfg["criterion"] == flags["--criterion"]
    assert cfg["task"]["tokens_per_sample"] == int(flags["--tokens-per-sample"])
    assert cfg["model"]["max_positions"] == int(flags["--max-positions"])
    assert cfg["task"]["sample_break_mode"] == flags["--sample-break-mode"]
    assert cfg["task"]["pad_to_multiple"] == int(flags["--pad-to-multiple"])
    assert cfg["model"]["attention_window"] == flags["--attention-window"]
    assert cfg["model"]["dropout"] == float(flags["--dropout"])
    assert cfg["model"]["checkpoint_activations"] is (flags.get("--checkpoint-activations") is True)
    assert cfg["common"]["fp16"] is (flags.get("--fp16") is True)
    assert cfg["common"]["bf16"] is (flags.get("--bf16") is True)
    assert cfg["distributed_training"]["ddp_backend"] == flags["--ddp-backend"]
    assert cfg["checkpoint"]["finetune_from_model"] == "/roberta.pt"
    assert cfg["checkpoint"]["restore_file"] == "checkpoint_last.pt"  # resume by default


@pytest.mark.parametrize("launch,bf16", [("launch_sm90", True), ("launch_sm70", False)])
def test_hydra_launcher_picks_the_precision_as_the_shell_recipes_do(composed, tmp_path, launch, bf16):
    """PRECISION=auto: bf16 on compute capability >= 8.0 (H100), the yaml's fp16 below (V100), in
    the composed config fairseq-hydra-train trains with, as the single-node launcher's flags."""
    cfg = composed[launch]
    assert "error" not in cfg, cfg.get("error")
    assert cfg["common"]["bf16"] is bf16 and cfg["common"]["fp16"] is (not bf16)
    assert cfg["task"]["data"] == "/data" and cfg["checkpoint"]["finetune_from_model"] == "/roberta.pt"
    data = tmp_path / "data"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    (tmp_path / "roberta.pt").write_bytes(b"")
    _, _, flags = split_command(dry_run("single_node", {
        "MODEL": "base", "GPUS_PER_NODE": 1, "DATA": data, "ROBERTA_CKPT": tmp_path / "roberta.pt",
        "PRECISION": "auto", **fake_gpus(tmp_path, ["9.0" if bf16 else "7.0"])}))
    assert (flags.get("--bf16") is True) is bf16 and (flags.get("--fp16") is True) is (not bf16)


def test_a_typo_in_the_yaml_is_an_error(composed):
    """The yaml is merged into fairseq's schema: an unknown key stops composition (so the check
    above, on the real files, means every key there is one fairseq knows)."""
    assert "Error merging 'typo' with schema" in composed["typo"].get("error", "")


# fairseq-hydra-train imports the --user-dir only inside its training function, after fairseq's
# distributed init; on a CPU-only machine that init needs the runtime's torchrun patch (it divides by
# the GPU count), so the test starts hydra's entry point with the plugin already imported. On
# GPUs, `torchrun ... $(which fairseq-hydra-train) ...` works as is.
_HYDRA_ENTRY = "import fairseq_longformer  # noqa: F401\nfrom fairseq_cli.hydra_train import cli_main\ncli_main()\n"


def test_hydra_config_trains_on_two_processes_with_checkpointing(kjv_data_bin, tmp_path, reference_curve):
    entry = tmp_path / "hydra_train.py"
    entry.write_text(_HYDRA_ENTRY)
    # the recipe's yaml, shrunk to the tiny model and the reference's optimiser settings;
    # activation checkpointing stays on (the yaml's model.checkpoint_activations: true)
    overrides = [
        f"task.data={kjv_data_bin}", "checkpoint.finetune_from_model=null",
        f"checkpoint.save_dir={tmp_path / 'save'}", "checkpoint.no_save=true",
        f"common.user_dir={REPO / 'fairseq_longformer'}", "common.fp16=false", "common.cpu=true",
        "common.log_interval=1", "common.seed=3",
        f"optimization.max_update={REFERENCE_UPDATES}", "optimization.update_freq=[1]",
        "optimization.lr=[0.001]", "optimizer.adam_betas='(0.9,0.999)'", "optimizer.adam_eps=1e-8",
        "optimizer.weight_decay=0", "lr_scheduler.warmup_updates=2", "lr_scheduler.total_num_update=20",
        "lr_scheduler.power=1",
        "distributed_training.distributed_world_size=2", "distributed_training.distributed_backend=gloo",
        "dataset.batch_size=4", "dataset.required_batch_size_multiple=8", "dataset.num_workers=0",
        "dataset.disable_validation=true",
        "task.tokens_per_sample=128", "task.pad_to_multiple=16", "model.max_positions=128",
        "model.attention_window=16", "model.dropout=0", "+model.encoder_layers=2",
        "+model.encoder_embed_dim=64", "+model.encoder_ffn_embed_dim=128", "+model.encoder_attention_heads=4",
    ]
    cmd = [TORCHRUN, "--nproc_per_node", "2", "--master-port", str(free_port()), str(entry),
           "--config-dir", str(HYDRA_DIR), "--config-name", "longformer_base", *overrides]
    text = run_logged(cmd, tmp_path / "train.log", timeout=240, cwd=tmp_path)
    assert devices_trained_on(text) == 2, shlex.join(map(str, cmd))
    assert "'checkpoint_activations': True" in text
    records = train_inner(text)
    assert sorted(records) == list(range(1, REFERENCE_UPDATES + 1))
    assert_same_curve(records, reference_curve, range(1, REFERENCE_UPDATES + 1))
