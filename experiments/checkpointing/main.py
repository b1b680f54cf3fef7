"""The measurement, each setting in a fresh process; see the package's docstring."""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import longformer_experiments.checkpointing as package

MODULE = "longformer_experiments.checkpointing"

VOCAB = 50265  # RoBERTa's dictionary (GPT-2 BPE)


def _rss_mib() -> float:
    """Current resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure_one(opts) -> dict:
    """Runs in its own process: build, one forward + backward, report memory and time."""
    import torch
    from fairseq import options
    from fairseq.data import Dictionary

    import fairseq_longformer  # noqa: F401  (registers the model; applies the runtime patches)
    from fairseq_longformer.models.longformer import LongformerModel

    torch.manual_seed(0)
    torch.set_num_threads(opts.threads)
    device = torch.device("cuda" if torch.cuda.is_available() and not opts.cpu else "cpu")

    parser = options.get_training_parser()
    flags = ["/nonexistent", "--task", "masked_lm", "--arch", opts.arch,
             "--max-positions", str(opts.tokens), "--attention-window", str(opts.window),
             "--dropout", "0.0"]
    if opts.layers:
        flags += ["--encoder-layers", str(opts.layers)]
    if opts.checkpoint_activations:
        flags.append("--checkpoint-activations")
    args = options.parse_args_and_arch(parser, input_args=flags)
    assert getattr(args, "checkpoint_activations", False) == opts.checkpoint_activations

    dictionary = Dictionary()
    for i in range(VOCAB - len(dictionary)):
        dictionary.add_symbol(f"w{i}")

    class _Task:  # the two things RoBERTa's builder asks of a task
        source_dictionary = dictionary

        @staticmethod
        def max_positions():
            return opts.tokens

    model = LongformerModel.build_model(args, _Task()).to(device)
    model.train()

    # src_tokens (B, N) with <s> first; 15% of the positions masked, as in MLM pretraining
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, VOCAB, (opts.batch, opts.tokens), generator=gen)
    tokens[:, 0] = dictionary.bos()
    masked = torch.rand(opts.batch, opts.tokens, generator=gen) < 0.15
    tokens, masked = tokens.to(device), masked.to(device)
    targets = tokens[masked]

    params = sum(p.numel() for p in model.parameters())
    rss_before = _rss_mib()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before_cuda = torch.cuda.memory_allocated() / 2**20
    start = time.perf_counter()
    logits = model(tokens, masked_tokens=masked)[0]  # (masked, V)
    loss = torch.nn.functional.cross_entropy(logits.float(), targets)
    loss.backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {
        "arch": opts.arch, "layers": args.encoder_layers, "dim": args.encoder_embed_dim,
        "tokens": opts.tokens, "batch": opts.batch, "window": opts.window,
        "checkpoint_activations": opts.checkpoint_activations, "params_M": round(params / 1e6, 1),
        "rss_before_MiB": round(rss_before), "peak_rss_MiB": round(_peak_rss_mib()),
        "seconds": round(seconds, 1), "loss": round(float(loss), 4), "device": device.type,
    }
    result["fwd_bwd_MiB"] = result["peak_rss_MiB"] - result["rss_before_MiB"]
    if device.type == "cuda":
        result["cuda_fwd_bwd_MiB"] = round(torch.cuda.max_memory_allocated() / 2**20 - before_cuda)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="longformer_base", choices=["longformer_base", "longformer_large"])
    parser.add_argument("--layers", type=int, default=0, help="override the number of layers (0: the arch's)")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--window", type=int, default=256, help="one-sided window w")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cpu", action="store_true", help="measure on CPU even when CUDA is present")
    parser.add_argument("--checkpoint-activations", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)

    if opts.one:  # child process: one setting
        print(json.dumps(measure_one(opts)))
        return

    results = []
    for ckpt in (False, True):
        cmd = [sys.executable, "-m", MODULE, "--one", "--arch", opts.arch,
               "--layers", str(opts.layers), "--tokens", str(opts.tokens), "--batch", str(opts.batch),
               "--window", str(opts.window), "--threads", str(opts.threads)]
        cmd += ["--cpu"] if opts.cpu else []
        cmd += ["--checkpoint-activations"] if ckpt else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    plain, ckpt = results
    saved = plain["fwd_bwd_MiB"] - ckpt["fwd_bwd_MiB"]
    print(f"{plain['arch']} ({plain['layers']} x {plain['dim']}), batch {plain['batch']} x {plain['tokens']} "
          f"tokens, w={plain['window']}, {plain['device']}:")
    print(f"  forward+backward memory: {plain['fwd_bwd_MiB']} MiB without, {ckpt['fwd_bwd_MiB']} MiB with "
          f"--checkpoint-activations (saves {saved} MiB, {100 * saved / max(plain['fwd_bwd_MiB'], 1):.0f}%)")
    print(f"  peak RSS: {plain['peak_rss_MiB']} vs {ckpt['peak_rss_MiB']} MiB; "
          f"time: {plain['seconds']} s vs {ckpt['seconds']} s; loss {plain['loss']} vs {ckpt['loss']}")

