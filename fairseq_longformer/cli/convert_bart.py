"""``longformer-convert-bart``: a fairseq BART checkpoint -> an LED checkpoint folder.

    longformer-convert-bart --source bart.large/ --output led.large/ \\
        --max-positions 16384 --attention-window 512

The logic lives in ``fairseq_longformer.conversion.fairseq_sources`` (spec ``BART``); this module only parses flags and
prints the fairseq-train and fairseq-generate commands for the result.
"""
import argparse
import sys

from longformer_common.cli import one_line_errors

from . import checkpoint_converter_parser, run_converter
from ..conversion.fairseq_sources import DEFAULT_MAX_POSITIONS, DEFAULT_WINDOW, convert_bart_checkpoint, generate_command
from ..conversion.fairseq_checkpoint import continue_command


def build_parser() -> argparse.ArgumentParser:
    parser = checkpoint_converter_parser(
        "longformer-convert-bart",
        "Convert a fairseq BART checkpoint (model.pt + dict.txt) into an LED checkpoint: encoder "
        "positions tiled, global Q/K/V copied from Q/K/V, decoder untouched.", "BART")
    parser.add_argument("--max-positions", type=int, default=DEFAULT_MAX_POSITIONS,
                        help=f"encoder positions of the LED (default {DEFAULT_MAX_POSITIONS}); a multiple of "
                             "BART's (1,024 for bart.base and bart.large)")
    parser.add_argument("--attention-window", default=DEFAULT_WINDOW,
                        help=f"one-sided window w, one value or one per encoder layer, comma-separated "
                             f"(default {DEFAULT_WINDOW}, i.e. Hugging Face's attention_window 1024)")
    return parser


@one_line_errors
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    result = run_converter("longformer-convert-bart", lambda: convert_bart_checkpoint(
        args.source, args.output, max_positions=args.max_positions, attention_window=args.attention_window,
        checkpoint_file=args.checkpoint_file, dict_file=args.dict, overwrite=args.overwrite,
    ), trust=args.trust_checkpoint)
    if result is None:
        return 2
    windows = ",".join(str(w) for w in result.attention_window)
    print(f"wrote {result.checkpoint} and {result.dictionary} "
          f"({result.bart_positions} -> {result.max_positions} encoder positions, one-sided window {windows})")
    print("fine-tune (source = document, target = summary; data binarized with this dict.txt) with:\n  "
          + continue_command(result.train_flags()) + " ...")
    print("generate with:\n  " + generate_command(result) + " ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
