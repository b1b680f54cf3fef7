"""Stock transformers Longformer / LED against the same models after
``longformer_kernels.hf.accelerate`` (this project's attention), side by side on one machine.

Cases (each a pair of models holding the same random weights, one accelerated):
    longformer_forward   LongformerModel, eval, no_grad, N tokens, token 0 global
    longformer_fwd_bwd   the same in training mode (dropout 0), sum of the output, backward
    led_encoder_forward  LEDModel's encoder, eval, no_grad, N_led tokens, token 0 global
    led_generate         LEDForConditionalGeneration.generate, greedy, a fixed number of new
                         tokens from an N_gen-token source (token 0 global)
    onnx_forward         LongformerForMaskedLM forward, stock PyTorch against onnxruntime running
                         the graph ``longformer-export-onnx`` writes (same weights, same threads)
Timings are interleaved (stock, accelerated, stock, ...) after one warm-up call of each, so a
busy spell of a shared machine falls on both alike; each row keeps every run, the median and
the range. The outputs of the two models are compared once per case (max |difference|).
"""
import copy
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List

import torch

from longformer_common.quiet import load_banner
from longformer_common.staleness import CPU_MODEL_CODE, stale_banner

CASES = ("longformer_forward", "longformer_fwd_bwd", "led_encoder_forward", "led_generate", "onnx_forward")
# cases whose second model is not the accelerated one: what the "accelerated" column then holds
CONTENDERS = {"onnx_forward": "onnxruntime"}


@dataclass(frozen=True)
class Sizes:
    layers: int
    hidden: int
    heads: int
    ffn: int
    window: int  # ONE-sided w (transformers' attention_window is 2w)
    length: int  # Longformer N
    led_length: int  # LED encoder N
    gen_length: int  # LED source N for generation
    new_tokens: int
    led_window: int = 512  # the released LED's one-sided w (attention_window 1024)
    vocab: int = 1000


def _padded(length: int, window: int) -> int:
    """transformers pads the input to a multiple of attention_window (2w): the positions it needs."""
    return -(-length // (2 * window)) * 2 * window


def _inputs(length: int, vocab: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (1, length), generator=gen)
    ids[0, 0] = 0
    glob = torch.zeros_like(ids)
    glob[0, 0] = 1
    return ids, torch.ones_like(ids), glob


def longformer_pair(s: Sizes):
    import transformers

    from longformer_kernels.hf import accelerate

    config = transformers.LongformerConfig(
        vocab_size=s.vocab, hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
        intermediate_size=s.ffn, max_position_embeddings=_padded(s.length, s.window) + 2, attention_window=2 * s.window,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1)
    torch.manual_seed(0)
    stock = transformers.LongformerModel(config, add_pooling_layer=False)
    return stock, accelerate(copy.deepcopy(stock))


def led_pair(s: Sizes, length: int):
    import transformers

    from longformer_kernels.hf import accelerate

    config = transformers.LEDConfig(
        vocab_size=s.vocab, d_model=s.hidden, encoder_layers=s.layers, decoder_layers=s.layers,
        encoder_attention_heads=s.heads, decoder_attention_heads=s.heads, encoder_ffn_dim=s.ffn,
        decoder_ffn_dim=s.ffn, max_encoder_position_embeddings=_padded(length, s.led_window), max_decoder_position_embeddings=1024,
        attention_window=2 * s.led_window, dropout=0.0, attention_dropout=0.0, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(0)
    stock = transformers.LEDForConditionalGeneration(config).eval()
    return stock, accelerate(copy.deepcopy(stock))


def _calls(case: str, s: Sizes) -> Dict[str, Callable[[], torch.Tensor]]:
    """{'stock': call, 'accelerated': call}: each call runs the case once and returns a tensor
    to compare."""
    if case in ("longformer_forward", "longformer_fwd_bwd"):
        models = dict(zip(("stock", "accelerated"), longformer_pair(s)))
        ids, mask, glob = _inputs(s.length, s.vocab)

        def call(model):
            if case == "longformer_forward":
                model.eval()
                with torch.no_grad():
                    return model(input_ids=ids, attention_mask=mask, global_attention_mask=glob).last_hidden_state
            model.train()
            model.zero_grad(set_to_none=True)
            out = model(input_ids=ids, attention_mask=mask, global_attention_mask=glob).last_hidden_state
            out.float().pow(2).mean().backward()
            return model.embeddings.word_embeddings.weight.grad
    elif case == "led_encoder_forward":
        models = dict(zip(("stock", "accelerated"), led_pair(s, s.led_length)))
        ids, mask, glob = _inputs(s.led_length, s.vocab)

        def call(model):
            with torch.no_grad():
                return model.get_encoder()(input_ids=ids, attention_mask=mask,
                                           global_attention_mask=glob).last_hidden_state
    elif case == "led_generate":
        models = dict(zip(("stock", "accelerated"), led_pair(s, s.gen_length)))
        ids, mask, glob = _inputs(s.gen_length, s.vocab)

        def call(model):
            with torch.no_grad():
                return model.generate(input_ids=ids, attention_mask=mask, global_attention_mask=glob,
                                      max_new_tokens=s.new_tokens, min_new_tokens=s.new_tokens, num_beams=1,
                                      do_sample=False).float()
    elif case == "onnx_forward":
        return _onnx_calls(s)
    else:
        raise ValueError(f"unknown case {case!r}: one of {CASES}")
    return {name: (lambda m=model: call(m)) for name, model in models.items()}


def _onnx_calls(s: Sizes) -> Dict[str, Callable[[], torch.Tensor]]:
    import tempfile

    import onnxruntime
    import transformers

    from fairseq_longformer.serving import export_graph, graph_module

    config = transformers.LongformerConfig(
        vocab_size=s.vocab, hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
        intermediate_size=s.ffn, max_position_embeddings=_padded(s.length, s.window) + 2, attention_window=2 * s.window,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1)
    torch.manual_seed(0)
    model = transformers.LongformerForMaskedLM(config).eval()
    _, module, outputs = graph_module(model)
    with tempfile.TemporaryDirectory() as scratch:
        export_graph(module, outputs, Path(scratch) / "m.onnx", s.vocab)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        session = onnxruntime.InferenceSession(str(Path(scratch) / "m.onnx"), options,
                                               providers=["CPUExecutionProvider"])
    ids, mask, glob = _inputs(s.length, s.vocab)
    feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "global_attention_mask": glob.numpy()}

    def stock():
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=mask, global_attention_mask=glob).logits

    return {"stock": stock, "accelerated": lambda: torch.from_numpy(session.run(None, feed)[0])}


def run_case(case: str, s: Sizes, runs: int) -> dict:
    """One row: per model every run's seconds, median, min, max; speedup = stock median /
    accelerated median; the max |difference| of their outputs; the load average before and after."""
    load_before = _load()
    calls = _calls(case, s)
    outputs = {name: call() for name, call in calls.items()}  # warm-up, and the outputs compared
    difference = (outputs["stock"] - outputs["accelerated"]).abs().max().item()
    seconds: Dict[str, List[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    row = {"case": case, "contender": CONTENDERS.get(case, "accelerated"), "max_abs_difference": difference, "load_average_before": load_before,
           "load_average_after": _load()}
    for name, values in seconds.items():
        row[name] = {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values),
                     "runs_s": values}
    row["speedup"] = row["stock"]["median_s"] / row["accelerated"]["median_s"]
    return row


def _load():
    import os

    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def page(report: dict) -> str:
    """The markdown results page of a stored report (the CLI writes it from the JSON it stored)."""
    s, env = report["settings"], report["environment"]
    lengths = {"longformer_forward": s["length"], "longformer_fwd_bwd": s["length"], "onnx_forward": s["length"],
               "led_encoder_forward": s["led_length"], "led_generate": s["gen_length"]}
    rows = report["results"]
    banner = load_banner(env.get("load_average_at_start", rows[0].get("load_average_before") if rows else None),
                         env.get("load_average_at_end", rows[-1].get("load_average_after") if rows else None))
    stale = stale_banner(env.get("commit"), CPU_MODEL_CODE + ("fairseq_longformer/serving",))
    lines = [
        "# transformers' Longformer / LED, stock against `longformer_kernels.hf.accelerate` (CPU)", "",
        *[line for text in (banner, stale) if text for line in (text, "")],
        f"Written by `{report['command']}`. Measured on commit {env['commit']}, {env['date']}, {env['processor']} "
        f"({env['cpus']} CPUs, {s['threads']} torch threads), torch {env['torch']}, transformers "
        f"{env['transformers']}. Random weights: {s['layers']} layer(s) of {s['hidden']} wide, {s['heads']} "
        f"heads, FFN {s['ffn']}, one-sided window w = {s['window']} (attention_window {2 * s['window']}; LED "
        f"{s['led_window']}, attention_window {2 * s['led_window']}), "
        f"token 0 global, batch 1, fp32. {s['runs']} timed runs per model after one warm-up, interleaved.",
        "",
        "| case | tokens | stock median s (range) | accelerated median s (range) | speedup | max abs diff | "
        "load average before / after |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in report["results"]:
        st, ac = row["stock"], row["accelerated"]
        lines.append(
            f"| {row['case']}{'' if row.get('contender', 'accelerated') == 'accelerated' else ' (' + row['contender'] + ')'} "
            f"| {lengths[row['case']]:,} | {st['median_s']:.3f} ({st['min_s']:.3f}-{st['max_s']:.3f}) "
            f"| {ac['median_s']:.3f} ({ac['min_s']:.3f}-{ac['max_s']:.3f}) | {row['speedup']:.2f} | "
            f"{row['max_abs_difference']:.2g} | {row['load_average_before']} / {row['load_average_after']} |")
    lines += ["", "speedup = stock median / accelerated median (> 1: accelerated faster); a case marked "
              "(onnxruntime) has onnxruntime running the exported graph in the accelerated column. led_generate: "
              f"{s['new_tokens']} new tokens, greedy (the encoder runs once; the decoder is stock in both).",
              "A load average above the CPU count means other processes shared the machine: the ratio, measured "
              "side by side, is the figure to read, not the absolute times.", ""]
    return "\n".join(lines)
