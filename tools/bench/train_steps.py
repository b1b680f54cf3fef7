"""Whole training steps, the number users choose a pretraining tool by: tokens per second per
device, peak memory and model FLOP utilisation (``longformer-bench train-steps``).

A step is forward + loss + backward + AdamW update, under bf16 autocast (fp32 weights and
optimizer state, as fairseq's --bf16 keeps fp32 master weights), in training mode (each
architecture's dropout), with activation checkpointing off or on. Rows:

  longformer_mlm       our ``longformer_base`` masked LM (fairseq's builders, the plugin's
                       ``longformer_mlm`` criterion: ``mlm_step``)
  transformers_mlm     transformers' ``LongformerForMaskedLM`` holding the same weights (its own
                       attention; ``mlm_step.build_model``)
  roberta_sdpa_mlm     transformers' ``RobertaForMaskedLM`` of the same sizes with positions
                       extended to N, PyTorch's dense SDPA attention (the flash backend on CUDA:
                       no mask), random weights
  led_encoder          our LED encoder (``led_encoder``: LED-large's 12 x 1024 on CUDA), the first
                       token global, the loss sum(output * fixed random)
  char_lm              ``longformer_lm_small`` at the char-LM's longest phase (23,040 on CUDA; the
                       architecture's growing windows and dilation: ``lm_step``)

The batch fills the device: doubled from 1 while a step's peak stays under half the GPU's
memory (``--max-batch`` caps it; an out-of-memory batch is not used); on the CPU it is
``--max-batch``. Each row then times ``--repeats`` steps (median, min, max; synchronised). MFU =
the step's useful FLOPs (``longformer_tools.flops``) per second over the bf16 matmul rate measured in the
same run (``matmul_rate``: 8192^3 on CUDA). On the CPU the same code runs at tiny sizes
(``SIZES["tiny"]``), for CI.
"""
import gc
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional

import torch

from longformer_tools import flops

ROWS = ("longformer_mlm", "transformers_mlm", "roberta_sdpa_mlm", "led_encoder", "char_lm")
# per size set: the MLM (longformer_base), the LED encoder (LED-large's), the char-LM
SIZES = {
    "full": {"mlm": dict(length=4096, layers=12, heads=12, head_dim=64, vocab=50265, window=256),
             "led": dict(length=16384, layers=12, heads=16, head_dim=64, ffn=4096, vocab=50265, window=512),
             "lm": dict(length=23040, heads=8, head_dim=64), "matmul": 8192},
    "tiny": {"mlm": dict(length=128, layers=2, heads=2, head_dim=16, vocab=500, window=8),
             "led": dict(length=128, layers=2, heads=2, head_dim=16, ffn=64, vocab=500, window=8),
             "lm": dict(length=128, heads=2, head_dim=16), "matmul": 256},  # longformer_lm_small's 12 layers, narrow
    # recipes/quickstart.sh's model (3 layers x 128, 4 heads, 1,024 tokens, 8,000 pieces; its windows
    # 2,8,64 here one window of 64); LED and char-LM rows as at the tiny sizes
    "quickstart": {"mlm": dict(length=1024, layers=3, heads=4, head_dim=32, vocab=8000, window=64),
                   "led": dict(length=128, layers=2, heads=2, head_dim=16, ffn=64, vocab=500, window=8),
                   "lm": dict(length=128, heads=2, head_dim=16), "matmul": 1024},
}
FILL = 0.5  # stop doubling once a step's peak passes this share of the GPU's memory


@dataclass
class Row:
    name: str
    length: int
    checkpointing: bool
    batch: int = 0
    status: str = "ok"
    note: str = ""
    step_ms: List[float] = field(default_factory=list)
    peak_mb: Optional[float] = None
    step_flops: int = 0

    def summary(self, matmul_tflops: float) -> dict:
        median = statistics.median(self.step_ms) if self.step_ms else None
        tokens_per_s = self.batch * self.length / (median / 1e3) if median else None
        tflops = self.step_flops / (median / 1e3) / 1e12 if median else None
        return {"name": self.name, "length": self.length, "checkpointing": self.checkpointing, "batch": self.batch,
                "status": self.status, "note": self.note, "step_ms_median": median,
                "step_ms_min": min(self.step_ms, default=None), "step_ms_max": max(self.step_ms, default=None),
                "repeats": len(self.step_ms), "tokens_per_s": tokens_per_s, "peak_mb": self.peak_mb,
                "step_tflop": self.step_flops / 1e12, "tflops": tflops,
                "mfu": tflops / matmul_tflops if tflops and matmul_tflops else None}


def matmul_rate(device: torch.device, size: int, repeats: int = 5) -> float:
    """TFLOP/s of a bf16 (size x size) @ (size x size) product on random data, median of repeats."""
    a, b = (torch.randn(size, size, device=device).to(torch.bfloat16) for _ in range(2))
    times = []
    for index in range(repeats + 2):  # two warm-ups
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        if index >= 2:
            times.append(time.perf_counter() - start)
    return 2.0 * size ** 3 / statistics.median(times) / 1e12


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- the contenders: (model, inputs(batch) -> dict, loss(model, inputs) -> scalar, forward FLOPs per sequence)
def _mlm(name: str, sizes: dict, checkpointing: bool):
    from .mlm_step import MLMStepCase, _criterion, _dictionary, build_model, mlm_inputs, step_loss

    case = MLMStepCase(impl="longformer", global_tokens=0, **sizes, checkpoint_activations=checkpointing)
    hidden, ffn, n = case.hidden, 4 * case.hidden, case.length
    masked = max(1, round(0.15 * n))
    forward = case.layers * flops.layer_forward_flops(n, hidden, ffn, case.heads,
                                                   flops.longformer_pairs(n, case.window, (1,) * case.heads, False))
    if name == "roberta_sdpa_mlm":
        import transformers

        config = transformers.RobertaConfig(
            vocab_size=case.vocab, hidden_size=hidden, num_hidden_layers=case.layers, num_attention_heads=case.heads,
            intermediate_size=ffn, max_position_embeddings=n + 2, type_vocab_size=1, pad_token_id=1, bos_token_id=0,
            eos_token_id=2, layer_norm_eps=1e-5, attn_implementation="sdpa")
        torch.manual_seed(case.seed)
        model = transformers.RobertaForMaskedLM(config)
        dictionary = _dictionary(case.vocab)
        forward = case.layers * flops.layer_forward_flops(n, hidden, ffn, case.heads, [n * n] * case.heads)
        impl = "transformers"
    else:
        impl = "longformer" if name == "longformer_mlm" else "transformers"
        model, dictionary = build_model(case, impl)
    if checkpointing and impl == "transformers":
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    criterion = _criterion(dictionary)
    forward += flops.masked_lm_head_flops(masked, hidden, case.vocab)
    return (model, lambda b: mlm_inputs(replace(case, batch=b), n, dictionary),
            lambda m, x: step_loss(impl, m, criterion, x), forward)


def _led(sizes: dict, checkpointing: bool):
    from .led_encoder import EncoderCase, build_encoder, encoder_inputs

    case = EncoderCase(impl="led", global_tokens=1, bart_positions=min(1024, sizes["length"]), **sizes,
                       checkpoint_activations=checkpointing)
    encoder, dictionary = build_encoder(case)
    n, hidden = case.length, case.hidden
    forward = case.layers * flops.layer_forward_flops(n, hidden, case.ffn, case.heads,
                                                   flops.longformer_pairs(n, case.window, (1,) * case.heads, False, 1),
                                                   global_tokens=1)

    def loss(module, x):
        out = module(x["src_tokens"], src_lengths=x["src_lengths"])["encoder_out"][0]  # (N, B, C)
        return (out.float() * x["grad_out"]).sum()
    return encoder, lambda b: encoder_inputs(replace(case, batch=b), n, dictionary), loss, forward


def _char_lm(sizes: dict, checkpointing: bool):
    from fairseq_longformer import LongformerSelfAttention

    from .lm_step import LMStepCase, build_lm, lm_inputs, lm_loss

    case = LMStepCase(impl="longformer", global_tokens=0, **sizes, checkpoint_activations=checkpointing)
    model, dictionary = build_lm(case)
    n, hidden = case.length, case.hidden
    forward = 2 * n * hidden * case.vocab  # the tied output embedding
    for layer in model.decoder.layers:
        attention = layer.self_attn
        assert isinstance(attention, LongformerSelfAttention), type(attention)
        pattern = attention.config.pattern
        pairs = [flops.dilated_pairs(n, pattern.window, d, True) for d in pattern.dilation_per_head(attention.num_heads)]
        forward += flops.layer_forward_flops(n, hidden, layer.fc1.out_features, attention.num_heads, pairs)
    return (model, lambda b: dict(zip(("tokens", "target"), lm_inputs(replace(case, batch=b), n, dictionary))),
            lambda m, x: lm_loss(m, x["tokens"], x["target"])[0], forward)


def build(name: str, sizes: dict, checkpointing: bool):
    if name in ("longformer_mlm", "transformers_mlm", "roberta_sdpa_mlm"):
        return _mlm(name, sizes["mlm"], checkpointing)
    if name == "led_encoder":
        return _led(sizes["led"], checkpointing)
    if name == "char_lm":
        return _char_lm(sizes["lm"], checkpointing)
    raise ValueError(f"unknown row {name!r}; expected one of {ROWS}")


def _to(inputs: Dict[str, torch.Tensor], device: torch.device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _oom(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error)


def measure(name: str, sizes: dict, checkpointing: bool, device: torch.device, max_batch: int, repeats: int,
            time_cap: float) -> Row:
    """One row: build, choose the batch, time ``repeats`` steps."""
    length = sizes["mlm" if name.endswith("_mlm") else "led" if name == "led_encoder" else "lm"]["length"]
    row = Row(name, length, checkpointing)
    model, make_inputs, loss_fn, forward = build(name, sizes, checkpointing)
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, **({"fused": True} if device.type == "cuda" else {}))

    def step(inputs) -> float:
        _sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = loss_fn(model, inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        return (time.perf_counter() - start) * 1e3

    total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    # the CPU has no memory to fill: its batch is --max-batch (a search from 1 stopped at 1 there)
    chosen, batch, started = None, 1 if total else max_batch, time.perf_counter()
    while batch <= max_batch:
        try:
            inputs = _to(make_inputs(batch), device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            step(inputs), step(inputs)  # the first compiles kernels and allocates the optimizer state
            peak = torch.cuda.max_memory_allocated(device) if total else None
        except Exception as error:  # noqa: BLE001 (an out-of-memory ends the search; anything else is the row's status)
            if not _oom(error):
                raise
            inputs = None
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
            row.note = f"batch {batch}: out of memory"
            break
        chosen = batch
        if total is None or peak > FILL * total or time.perf_counter() - started > time_cap / 2:
            break
        batch *= 2
    if chosen is None:
        row.status = "oom"
        return row
    row.batch = chosen
    inputs = _to(make_inputs(chosen), device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    row.step_ms = [step(inputs) for _ in range(repeats)]
    row.peak_mb = torch.cuda.max_memory_allocated(device) / 2 ** 20 if total else None
    row.step_flops = flops.step_flops(forward * chosen)
    return row


def run(names, checkpointing, device: torch.device, size: str, max_batch: int, repeats: int, time_cap: float,
        progress: Callable[[str], None] = print, save: Callable[[dict], None] = lambda report: None) -> dict:
    """Every (row, checkpointing) in turn, all rows without checkpointing first (a run cut short
    keeps those), each model freed before the next; the matmul rate first. ``save`` gets the
    report after every row."""
    sizes = SIZES[size]
    rate = matmul_rate(device, sizes["matmul"])
    progress(f"bf16 matmul {sizes['matmul']}^3: {rate:.2f} TFLOP/s")
    rows = []
    report = {"matmul_tflops": rate, "matmul_size": sizes["matmul"], "size": size, "rows": rows}
    for ckpt in checkpointing:
        for name in names:
            started = time.perf_counter()
            try:
                row = measure(name, sizes, ckpt, device, max_batch, repeats, time_cap)
            except Exception as error:  # noqa: BLE001 (one broken row must not hide the others)
                length = sizes["mlm" if name.endswith("_mlm") else "led" if name == "led_encoder" else "lm"]["length"]
                row = Row(name, length, ckpt, status="error", note=f"{type(error).__name__}: {str(error)[:300]}")
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            summary = row.summary(rate)
            rows.append(summary)
            progress(format_row(summary) + f"  ({time.perf_counter() - started:.0f} s)")
            save(report)
    return report


def time_bound(time_cap: float, names, checkpointing) -> float:
    """Seconds by which ``run(names, checkpointing, ..., time_cap)`` is over, generously: 600 to
    build the models and time the matmul, then 4 x ``time_cap`` per row and mode (a batch search
    stops doubling after half of it; the warm-ups and timed steps fit in the rest).

    What is started beside a timing uses it so that it ends on its own should its parent vanish:
    busy mode's spinners exit after it (their parent kills them sooner, when the timing ends),
    and an --omp-variants parent waits this long for each timing of a child, so the child and its
    spinners are killed sooner than the parent waits."""
    return 600 + 4 * time_cap * len(names) * len(checkpointing)


HEADER = f"{'row':18} {'N':>6} {'ckpt':>4} {'batch':>5} {'step ms':>9} {'tokens/s':>10} {'peak MB':>8} {'MFU':>6}  status"


def format_row(row: dict) -> str:
    def cell(value, spec):
        return format(value, spec) if value is not None else "-"
    return (f"{row['name']:18} {row['length']:>6} {'on' if row['checkpointing'] else 'off':>4} {row['batch']:>5} "
            f"{cell(row['step_ms_median'], '9.1f')} {cell(row['tokens_per_s'], '10.0f')} "
            f"{cell(row['peak_mb'], '8.0f')} {cell(row['mfu'], '6.1%')}  {row['status']} {row['note']}")


def busy_summary(quiet: List[dict], busy: List[dict]) -> List[dict]:
    """Per row measured ok in both conditions: tokens/s quiet and busy (from the median step) and
    slowdown = quiet tokens/s / busy tokens/s, with its range from the steps' min and max."""
    by_key = {(r["name"], r["checkpointing"]): r for r in busy}
    entries = []
    for q in quiet:
        b = by_key.get((q["name"], q["checkpointing"]))
        if b is None or q["status"] != "ok" or b["status"] != "ok" or not q["tokens_per_s"] or not b["tokens_per_s"]:
            continue
        entries.append({"name": q["name"], "checkpointing": q["checkpointing"], "length": q["length"],
                        "batch": q["batch"], "tokens_per_s_quiet": q["tokens_per_s"], "tokens_per_s_busy": b["tokens_per_s"],
                        "slowdown": q["tokens_per_s"] / b["tokens_per_s"],
                        "slowdown_min": b["step_ms_min"] / q["step_ms_max"], "slowdown_max": b["step_ms_max"] / q["step_ms_min"],
                        "repeats": min(q["repeats"], b["repeats"])})
    return entries


def format_busy(entries: List[dict]) -> List[str]:
    """The printed table of ``busy_summary``."""
    lines = [f"{'row':18} {'ckpt':>4} {'quiet tok/s':>12} {'busy tok/s':>11} {'slowdown (min-max)':>20}"]
    for e in entries:
        lines.append(f"{e['name']:18} {'on' if e['checkpointing'] else 'off':>4} {e['tokens_per_s_quiet']:>12,.0f} "
                     f"{e['tokens_per_s_busy']:>11,.0f} {e['slowdown']:>8.2f} ({e['slowdown_min']:.2f}-{e['slowdown_max']:.2f})")
    return lines
