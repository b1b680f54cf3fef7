"""What a GPU run proves beyond the CPU suite, selected by ``pytest --device cuda`` (with the
tests marked ``device`` elsewhere: the 16-bit training of every family, WikiHop, HotpotQA):

- every model family built through fairseq's builders (masked LM, classification and QA heads
  with global tokens, the causal dilated char-LM with relative positions, LED), forward and
  backward in fp32, fp16 and bf16 on the device against the same weights in CPU fp32;
- ``fairseq-train --bf16`` resumed from ``checkpoint_last.pt``, that checkpoint exported to
  Hugging Face and compared with transformers' own model on the device;
- torchrun with NCCL, one process (the backend's init and its first all-reduce);
- ``torch.compile(fullgraph=True, mode="reduce-overhead")`` of the encoder (CUDA graphs): no graph
  break, no recompilation when the global count changes, forward and backward as eager.

On the CPU (CI) the family test runs fp16 and bf16 at tiny sizes; the others skip with the
reason (what covers them on the CPU, or why they cannot run there).

Error measure: ||x - x_ref|| / ||x_ref|| over the outputs at non-padding positions, and over
all parameter gradients together, x_ref from CPU fp32. Tolerance: 20 unit roundoffs of the
arithmetic (bf16 2^-8; fp16 2^-11; fp32 on CUDA 2^-11 as well: Triton's fp32 dots use tf32).
"""
import copy
import re
import sys

import pytest
import torch

from tests.conftest import TINY_MODEL_ARGS
from tests.plugin.conversion.test_hf import fairseq_logits, global_mask, hf_logits, padded_batch
from tests.support.charlm import CharTask, build_lm, characters
from tests.support.device import device
from tests.support.registry_models import TINY_ENCODER, TINY_LED, build_registered, word_dictionary
from tests.support.training import BIN, FAIRSEQ_TRAIN, devices_trained_on, free_port, run_logged, train_inner

pytestmark = pytest.mark.device
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCE = {name: 20 * u for name, u in (("fp32", 2.0 ** -11), ("fp16", 2.0 ** -11), ("bf16", 2.0 ** -8))}
ON_CPU = "runs only with --device cuda"


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double().cpu() - want.double()).norm() / want.double().norm())


def _encoder_family(head: str):
    """(model, inputs, forward) of longformer_base with ``head``: the LM head, a classification
    head or a span head; row 1 padded, different global tokens per row (none for the LM)."""
    dictionary = word_dictionary()
    model = build_registered("longformer_base", dictionary, **TINY_ENCODER)
    model.register_classification_head("c", num_classes=3)
    model.register_span_head("s")
    src = padded_batch(dictionary, [45, 30])
    glob = None if head == "lm" else global_mask(src.shape, {0: [0, 1, 2], 1: [0]})
    kwargs = {"lm": {}, "classification": {"features_only": True, "classification_head_name": "c"},
              "qa": {"span_head_name": "s"}}[head]

    def forward(m, t):
        out = m(t["src"], global_attention_mask=t["glob"], **kwargs)[0]
        return out if head == "classification" else out[t["src"].ne(dictionary.pad())]
    return model, {"src": src, "glob": glob, "pad": dictionary.pad()}, forward


def _charlm_family():
    """The causal char-LM: dilated heads in the upper layers, relative positions."""
    model, task = build_lm(dtype=torch.float32, relative_positions=True)
    return model, {"src": characters(task, 2, 40)}, lambda m, t: m(t["src"])[0]


def _led_family():
    """LED: the encoder's first token global (its default), a one-layer decoder."""
    dictionary = word_dictionary()
    model = build_registered("led_base", dictionary, **TINY_LED)
    src = padded_batch(dictionary, [50, 33])
    prev = padded_batch(dictionary, [12, 12], seed=2)
    return model, {"src": src, "lengths": src.ne(dictionary.pad()).sum(1), "prev": prev}, \
        lambda m, t: m(t["src"], t["lengths"], t["prev"])[0]


FAMILIES = {"masked_lm": lambda: _encoder_family("lm"), "classification": lambda: _encoder_family("classification"),
            "qa": lambda: _encoder_family("qa"), "char_lm": _charlm_family, "led": _led_family}


def _step(model, inputs, forward, weights=None):
    """(output as fp32, every parameter's gradient as one fp32 vector, the loss weights) of a
    forward and the backward of sum(output * weights), weights fixed random (drawn on first use)."""
    model.zero_grad(set_to_none=True)
    out = forward(model, inputs).float()
    if weights is None:
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    (out * weights.to(out.device)).sum().backward()
    grads = [p.grad.float().flatten() for p in model.parameters() if p.grad is not None]
    return out.detach(), torch.cat(grads), weights


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_family_forward_backward_against_cpu_fp32(family, dtype):
    if device() == "cpu" and dtype == "fp32":
        pytest.skip("on the CPU fp32 is the reference itself")
    model, inputs, forward = FAMILIES[family]()
    model.eval()  # dropout is 0 anyway; eval keeps any training-only path out
    want_out, want_grads, weights = _step(model, inputs, forward)
    moved = copy.deepcopy(model).to(device=device(), dtype=DTYPES[dtype])
    on_device = {k: (v.to(device()) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    got_out, got_grads, _ = _step(moved, on_device, forward, weights)
    assert got_grads.numel() == want_grads.numel()  # the same parameters received gradients
    errors = {"output": _relative_error(got_out, want_out), "gradients": _relative_error(got_grads, want_grads)}
    print(family, dtype, device(), errors)
    assert all(error <= TOLERANCE[dtype] for error in errors.values()), (errors, TOLERANCE[dtype])


def _train(data, save, updates: int, log, *extra):
    return run_logged([FAIRSEQ_TRAIN, data, *TINY_MODEL_ARGS, "--batch-size", "4", "--optimizer", "adam", "--lr", "1e-3",
                       "--seed", "3", "--disable-validation", "--no-epoch-checkpoints", "--num-workers", "0",
                       "--log-format", "simple", "--log-interval", "1", "--max-update", str(updates),
                       "--save-dir", save, *extra], log, timeout=300)


@pytest.mark.skipif(device() == "cpu", reason=f"{ON_CPU} (--bf16 needs CUDA); on the CPU "
                    "tests/integration/test_resume_after_sigkill.py resumes and tests/plugin/conversion/test_hf.py "
                    "exports a fairseq-train checkpoint")
def test_bf16_training_resumes_then_exports_to_transformers(kjv_data_bin, tmp_path):
    import transformers
    from fairseq import checkpoint_utils

    _train(kjv_data_bin, tmp_path / "save", 2, tmp_path / "first.log", "--bf16")
    text = _train(kjv_data_bin, tmp_path / "save", 4, tmp_path / "resumed.log", "--bf16")
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 2 updates\)", text), text[-2000:]
    assert sorted(train_inner(text)) == [3, 4]
    checkpoint = tmp_path / "save" / "checkpoint_last.pt"
    run_logged([BIN / "longformer-export-hf", checkpoint, tmp_path / "hf"],
               tmp_path / "export.log", timeout=120)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)],
                                                                    arg_overrides={"data": str(kjv_data_bin)})
    ours = models[0].float().eval().to(device())
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval().to(device())
    d = task.source_dictionary
    src = padded_batch(d, [100, 57]).to(device())
    glob = global_mask(src.shape, {0: [0, 50], 1: [0]}).to(device())
    keep = src.ne(d.pad())
    error = _relative_error(fairseq_logits(ours, src, glob)[keep], hf_logits(theirs, src, d.pad(), glob)[keep].cpu())
    assert error <= TOLERANCE["fp32"], error


@pytest.mark.skipif(device() == "cpu", reason=f"{ON_CPU} (NCCL needs CUDA); on the CPU "
                    "tests/integration/test_distributed_training.py runs torchrun with gloo, two ranks")
def test_torchrun_with_nccl_one_process(kjv_data_bin, tmp_path):
    text = run_logged([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master-port",
                       str(free_port()), FAIRSEQ_TRAIN, kjv_data_bin, *TINY_MODEL_ARGS, "--batch-size", "4",
                       "--optimizer", "adam", "--lr", "1e-3", "--max-update", "2", "--no-save", "--disable-validation",
                       "--log-format", "simple", "--log-interval", "1", "--distributed-world-size", "1",
                       "--distributed-backend", "nccl", "--ddp-backend", "pytorch_ddp"], tmp_path / "train.log",
                      timeout=300)
    assert "distributed init (rank 0): env://" in text and "as rank 0" in text, text[-2000:]
    assert "'distributed_backend': 'nccl'" in text
    assert devices_trained_on(text) == 1 and sorted(train_inner(text)) == [1, 2]


@pytest.mark.skipif(device() == "cpu", reason=f"{ON_CPU} (CUDA graphs); on the CPU "
                    "tests/plugin/models/test_fullgraph_compile.py compiles the encoder, the LM and the LED "
                    "encoder with fullgraph=True")
def test_torch_compile_of_the_encoder_without_graph_breaks():
    """torch.compile(fullgraph=True, mode="reduce-overhead") of the whole encoder, the Triton
    kernel inside: one graph (a graph break raises), replayed as a CUDA graph, for two batches
    whose global counts differ (3 and 1 per row, then 3 and 0) under one static bound
    ``max_global_tokens``; outputs and parameter gradients match eager's (whose masks read the
    counts to the host) within the bf16 tolerance."""
    model, inputs, _ = _encoder_family("classification")
    encoder = model.to(device=device(), dtype=torch.bfloat16).eval().encoder
    compiled = torch.compile(encoder, fullgraph=True, mode="reduce-overhead", dynamic=False)
    src = inputs["src"].to(device())
    keep = src.ne(inputs["pad"])
    for rows in ({0: [0, 1, 2], 1: [0]}, {0: [5, 9, 30], 1: []}):
        glob = global_mask(src.shape, rows).to(device())
        results = []
        for run, bound in ((encoder, {}), (compiled, {"max_global_tokens": 4})):
            encoder.zero_grad(set_to_none=True)
            out = run(src, features_only=True, global_attention_mask=glob, **bound)[0].float()
            weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(device())
            (out * weights).sum().backward()
            grads = torch.cat([p.grad.float().flatten() for p in encoder.parameters() if p.grad is not None])
            results.append((out.detach().clone(), grads))  # the CUDA graph reuses its output memory
        (want_out, want_grads), (got_out, got_grads) = results
        assert got_grads.numel() == want_grads.numel()
        assert _relative_error(got_out[keep], want_out[keep].cpu()) <= TOLERANCE["bf16"]
        assert _relative_error(got_grads, want_grads.cpu()) <= TOLERANCE["bf16"]


def test_device_cuda_selects_the_device_tests_and_says_why_of_the_rest():
    """``pytest --device cuda`` (collection only: no GPU here) keeps exactly the tests marked
    ``device`` and names each deselected folder with its reason in the summary."""
    import subprocess

    from tests.conftest import REPO

    paths = ["tests/integration/test_on_device.py", "tests/integration/test_16bit_training.py",
             "tests/plugin/tasks/test_longformer_wikihop.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--device", "cuda", "-p",
                           "no:cacheprovider", *paths], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    selected = {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if "::" in line}
    assert selected == {"test_family_forward_backward_against_cpu_fp32", "test_bf16_training_resumes_then_exports_to_"
                        "transformers", "test_torchrun_with_nccl_one_process", "test_torch_compile_of_the_encoder_"
                        "without_graph_breaks", "test_device_cuda_selects_the_device_tests_and_says_why_of_the_rest",
                        "test_masked_lm", "test_classification_fine_tuning", "test_qa_fine_tuning",
                        "test_char_lm_with_relative_positions_then_eval_lm", "test_led_translation_then_generate",
                        "test_wikihop_recipe_smoke_run_trains_and_validates_every_example"}, selected
    assert "deselected by --device cuda" in done.stdout
    assert re.search(r"\d+ in tests/plugin: CPU numerics", done.stdout), done.stdout[-2000:]
    assert re.search(r"2 in tests/integration: CPU-only behaviour", done.stdout), done.stdout[-2000:]
