"""Real multi-process training on CPU (gloo): torchrun with 2 processes, and 2 "nodes" joined by a
c10d rendezvous on localhost. Each run must report the world size it really used (unpatched
fairseq under torchrun can silently run independent single-process trainings) and give the
same per-update loss as one process over the same global batch.

No flag --find-unused-parameters anywhere: in MLM no token is global, and the global
projections must still get a (zero) gradient, or DDP stops with "parameters that were not used
in producing loss" at the second update.
"""
import subprocess
import uuid

from tests.support.training import (
    FAIRSEQ_TRAIN, REFERENCE_UPDATES, TORCHRUN, assert_same_curve, devices_trained_on, free_port, kill_group,
    run_logged, subprocess_env, tail, tiny_train_cmd, train_inner,
)

DISTRIBUTED_FLAGS = ["--distributed-world-size", "2", "--distributed-backend", "gloo",
                     "--ddp-backend", "pytorch_ddp"]


def _check_two_rank_run(text: str, reference_curve) -> None:
    assert devices_trained_on(text) == 2
    for rank in (0, 1):
        assert f"as rank {rank}" in text, f"rank {rank} never initialised"
    # plain DDP, as the run itself was configured (fairseq logs its whole config): without the
    # zero gradient of the unused global projections it would stop at the second update
    assert "'find_unused_parameters': False" in text and "'find_unused_parameters': True" not in text
    records = train_inner(text)
    # each rank sees half of the epoch's batches: the one-process reference accumulates 2 of them
    assert {r["iterations_in_epoch"] for r in records.values()} == {
        r["iterations_in_epoch"] for r in reference_curve.values()}
    assert sorted(records) == list(range(1, REFERENCE_UPDATES + 1)), sorted(records)
    assert_same_curve(records, reference_curve, range(1, REFERENCE_UPDATES + 1))


def test_torchrun_two_processes_match_one_process(kjv_data_bin, tmp_path, reference_curve):
    cmd = [TORCHRUN, "--nproc_per_node", "2", "--master-port", str(free_port()), FAIRSEQ_TRAIN,
           *tiny_train_cmd(kjv_data_bin, tmp_path / "save", REFERENCE_UPDATES, "--no-save"),
           *DISTRIBUTED_FLAGS]
    text = run_logged(cmd, tmp_path / "train.log", timeout=240)
    _check_two_rank_run(text, reference_curve)


def test_two_nodes_c10d_rendezvous_on_localhost(kjv_data_bin, tmp_path, reference_curve):
    endpoint = f"127.0.0.1:{free_port()}"
    rdzv_id = uuid.uuid4().hex[:12]
    procs, logs = [], []
    for node in range(2):
        cmd = [TORCHRUN, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id, FAIRSEQ_TRAIN,
               *tiny_train_cmd(kjv_data_bin, tmp_path / "save", REFERENCE_UPDATES, "--no-save"),
               *DISTRIBUTED_FLAGS]
        logs.append(tmp_path / f"node{node}.log")
        with open(logs[-1], "w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                          env=subprocess_env(), start_new_session=True))
    try:
        codes = [proc.wait(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc)
    assert codes == [0, 0], "\n\n".join(tail(log) for log in logs)
    texts = [log.read_text() for log in logs]
    # the rendezvous decides which launcher hosts rank 0 (which logs training)
    rank0 = [t for t in texts if "training on" in t]
    assert len(rank0) == 1, "exactly one node must host rank 0"
    _check_two_rank_run("\n".join(texts), reference_curve)
