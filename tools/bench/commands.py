"""The benchmark commands' flags and the pages of their stored runs, apart from the commands.

A page names the command that regenerates it by the flags whose values differ from the command's
defaults, so rendering a page needs the command's parser. Kept here (the commands in
``longformer_tools.cli`` build their parsers from these) so that the page renderers
(``longformer_tools.report.results_pages``) render every page without importing the commands.
"""
import argparse

from . import results_page
from . import matmul_peak
from .bench_args import add_page_arguments, add_run_arguments, int_list
from .contenders import CONTENDERS
from .led_encoder import ENCODERS
from .lm_step import MODELS as LM_MODELS
from .measure import MEMORY_HELP
from .mlm_step import MODELS as MLM_MODELS

CPU_LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
GPU_LENGTHS = CPU_LENGTHS + [32768]


def figure1_parser(description: str = "") -> argparse.ArgumentParser:
    """longformer-bench's flags (``description``: the command's help text)."""
    parser = argparse.ArgumentParser(
        prog="longformer-bench",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up "
               "call, forward under torch.no_grad(), forward+backward with gradients of the input "
               "and all weights. On CPU the contenders of one length are timed side by side: each "
               "has a worker process with its module set up, and the workers are called in turn, "
               "round-robin, so a slow spell of a shared machine falls on all of them alike (every "
               "--dropout rate, and the matmul limit's worker, in the same round). A "
               "case whose first forward+backward exceeds --time-cap is recorded as too slow and "
               "longer lengths of that contender are skipped; an allocation failure is recorded "
               "as OOM, likewise.",
    )
    add_run_arguments(
        parser, unit="case", lengths=None,
        lengths_help=f"sequence lengths, e.g. '512,1024' (default: {','.join(map(str, CPU_LENGTHS))} on CPU, "
                     "up to 32768 on CUDA)",
        repeats=5, threads=2, time_cap=None, name=None, files="the JSON and PNG",
        time_cap_help="seconds one forward+backward may take before the case counts as too slow (default "
                      "60 on CPU, 30 on CUDA)",
        name_help="file name stem (default figure1_<device>)")
    parser.add_argument("--impls", nargs="+", default=None, choices=CONTENDERS,
                        help="contenders (default: dense torch hf, plus triton on CUDA)")
    parser.add_argument("--global-tokens", nargs="+", type=int, default=[0, 8],
                        help="numbers of global tokens (the first tokens of the sequence), default 0 8")
    parser.add_argument("--dropout", nargs="+", type=float, default=[0.0, 0.1],
                        help="attention-dropout rates, each timed side by side with the others (training "
                             "mode: ours' attention dropout, SDPA's dropout_p, HF's "
                             "attention_probs_dropout_prob), default 0 0.1")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda when available")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided window w (default 256 = Hugging Face attention_window 512)")
    parser.add_argument("--output-projection", action="store_true",
                        help="end every contender in the output projection (a whole attention "
                             "block); default: stop at the heads' output, as Hugging Face's "
                             "LongformerSelfAttention does")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="also time every point beside N pure-Python spin processes (started and killed by "
                             "the benchmark) and report each contender's slowdown and speedup over dense, quiet "
                             "and busy (default 0: quiet only)")
    parser.add_argument("--peak-sizes", type=int_list, default=list(matmul_peak.SIZES),
                        help="n of the square products that measure the matmul peak, e.g. '2048,4096' (default "
                             + ",".join(map(str, matmul_peak.SIZES)) + ")")
    add_page_arguments(parser, redraws=", re-draw <JSON minus .json>.png")
    parser.epilog += ("\n\nWhole training steps instead (tokens/s, peak memory, MFU; CUDA or tiny on CPU): "
                      "longformer-bench train-steps --help")
    return parser


def figure1_page(report: dict, json_path: str, markdown_path: str, png_path: str) -> str:
    """The results page of a stored longformer-bench run (``results_page.figure1_page``)."""
    return results_page.figure1_page(report, figure1_parser(), json_path, markdown_path, png_path)


def lm_parser(description: str = "") -> argparse.ArgumentParser:
    """longformer-bench-lm's flags."""
    parser = argparse.ArgumentParser(
        prog="longformer-bench-lm", description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up call. "
               "A step is forward, cross-entropy and backward into every weight, in training mode "
               "(dropout as the architecture's); 'fwd' is the eval-mode forward without gradients.")
    add_run_arguments(parser, unit="model", lengths=[4096, 16384],
                      lengths_help="characters per sequence (default 4096,16384)", repeats=3, threads=1,
                      time_cap=900.0, name="charlm_step_cpu", step="step")
    parser.add_argument("--arch", default="longformer_lm_small")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--checkpoint-activations", action="store_true",
                        help="both models recompute each layer in backward (fairseq's flag; the "
                             "char-LM recipes train with it)")
    parser.add_argument("--relative-positions", action="store_true",
                        help="both models with Transformer-XL's relative positions (the recipes' "
                             "setting): the dense one adds its (N, N) position scores as a float mask")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4,
                        help="largest |longformer loss - dense loss| (nats) accepted before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dense-window-offset", type=int, default=0, help=argparse.SUPPRESS)  # tests only
    add_page_arguments(parser)
    return parser


def led_parser(description: str = "") -> argparse.ArgumentParser:
    """longformer-bench-led's flags."""
    parser = argparse.ArgumentParser(prog="longformer-bench-led", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Memory: " + MEMORY_HELP)
    add_run_arguments(parser, unit="encoder", lengths=[4096, 16384],
                      lengths_help="source lengths N (default 4096,16384)", repeats=3, threads=2,
                      time_cap=3600.0, name="led_encoder_cpu")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64, help="width = heads x head-dim (default 768)")
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--vocab", type=int, default=50265)
    parser.add_argument("--window", type=int, default=512, help="the LED's ONE-sided window w (default 512)")
    parser.add_argument("--bart-positions", type=int, default=1024, help="BART's learned positions (tiled)")
    parser.add_argument("--check-length", type=int, default=512,
                        help="N of the equality check before timing (at most w + 1; default 512)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest |LED - dense| allowed there")
    add_page_arguments(parser)
    return parser


def mlm_parser(description: str = "") -> argparse.ArgumentParser:
    """longformer-bench-mlm's flags."""
    parser = argparse.ArgumentParser(
        prog="longformer-bench-mlm", description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up call. A step "
               "is forward, masked-LM loss and backward into every weight, in training mode (--dropout, "
               "--attention-dropout); ours sends only the masked positions through the LM head (fairseq's "
               "criterion), transformers every position (its forward with labels). 'fwd' is the eval-mode "
               "forward without gradients, every position's logits in both.")
    add_run_arguments(parser, unit="model", lengths=[4096], lengths_help="tokens per sequence (default 4096)",
                      repeats=3, threads=2, time_cap=900.0, name="mlm_step_cpu", step="step")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided window w (default 256 = Hugging Face attention_window 512)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768, help="width; the feed-forward is 4x (default 768)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50265,
                        help="dictionary size, specials and <mask> included (default 50265, RoBERTa's)")
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden dropout of both models (default 0.1)")
    parser.add_argument("--attention-dropout", type=float, default=0.1,
                        help="attention-probability dropout of both models (default 0.1)")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4,
                        help="largest |our loss - transformers' loss| / transformers' loss accepted before timing")
    parser.add_argument("--seed", type=int, default=0)
    add_page_arguments(parser)
    return parser


def _model_page(parser, title, impls, step: str = "fwd+bwd"):
    """The results page of a stored run of a whole-model benchmark, as a function
    ``page(report, json_path, markdown_path) -> str`` (``results_page.model_page``): headed by
    ``title(settings)`` and the command ``parser()`` reads; ``impls`` = (model, baseline)."""
    def page(report: dict, json_path: str, markdown_path: str) -> str:
        command = parser()
        return results_page.model_page(report, command, command.prog, title(report["settings"]), impls, json_path,
                                       markdown_path, step=step)
    return page


SIZED_DOWN = " (sized down from longformer_base's 12)"


def _lengths(settings: dict) -> str:
    """The run's sequence lengths for its page's title: "4,096" or "4,096 and 8,192"."""
    return " and ".join(f"{int(n):,}" for n in settings["lengths"])


lm_page = _model_page(
    lm_parser, lambda s: (f"Char-LM training step, {s['arch']}, N = {_lengths(s)}, "
                          f"{'relative' if s.get('relative_positions') else 'learned'} positions, activations "
                          f"{'checkpointed' if s.get('checkpoint_activations') else 'kept'}: "
                          "Longformer against dense attention"),
    LM_MODELS, step="step")
led_page = _model_page(
    led_parser, lambda s: (f"LED encoder against BART's dense encoder, N = {_lengths(s)}, {s['layers']} layer(s) of "
                           f"{s['heads'] * s['head_dim']}, one-sided window w = {s['window']}, forward+backward"),
    ENCODERS)
mlm_page = _model_page(
    mlm_parser, lambda s: (f"Masked-LM training step, N = {_lengths(s)}, {s['layers']} layers x {s['hidden']}"
                           f"{SIZED_DOWN if s['layers'] < 12 else ''}, "
                           f"{s['heads']} heads, "
                           f"w = {s['window']}, vocabulary {s['vocab']:,}: ours against transformers' "
                           "LongformerForMaskedLM"),
    MLM_MODELS, step="step")
