"""``longformer-convert-roberta``: a fairseq RoBERTa checkpoint -> a Longformer checkpoint folder.

    longformer-convert-roberta --source roberta.base/ --output longformer.base/ \\
        --max-positions 4096 --attention-window 256 --init-positions copy

The logic lives in ``fairseq_longformer.conversion.fairseq_sources`` (spec ``ROBERTA``); this module only parses flags and
prints the fairseq-train flags that continue pretraining from the result.
"""
import argparse
import sys

from longformer_common.cli import one_line_errors

from . import checkpoint_converter_parser, run_converter
from ..conversion.fairseq_checkpoint import continue_command
from ..conversion.fairseq_sources import convert_roberta_checkpoint


def build_parser() -> argparse.ArgumentParser:
    parser = checkpoint_converter_parser(
        "longformer-convert-roberta",
        "Convert a fairseq RoBERTa checkpoint (model.pt + dict.txt) into a Longformer checkpoint: "
        "positions extended, global Q/K/V copied from Q/K/V, config rewritten.", "RoBERTa")
    parser.add_argument("--max-positions", type=int, default=4096,
                        help="positions of the Longformer (default 4096); at least the source's")
    parser.add_argument("--attention-window", default="256",
                        help="one-sided window w, one value or one per layer, comma-separated "
                             "(default 256, i.e. the paper's and Hugging Face's 512)")
    parser.add_argument("--init-positions", choices=("copy", "random"), default="copy",
                        help="copy: tile RoBERTa's learned positions (the paper's init); random: "
                             "redraw every position (its ablation)")
    parser.add_argument("--seed", type=int, default=1, help="seed for --init-positions random")
    return parser


@one_line_errors
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    result = run_converter("longformer-convert-roberta", lambda: convert_roberta_checkpoint(
        args.source, args.output, max_positions=args.max_positions,
        attention_window=args.attention_window, init_positions=args.init_positions,
        checkpoint_file=args.checkpoint_file, dict_file=args.dict, seed=args.seed,
        overwrite=args.overwrite,
    ), trust=args.trust_checkpoint)
    if result is None:
        return 2
    print(f"wrote {result.checkpoint} and {result.dictionary} "
          f"({result.roberta_positions} -> {result.max_positions} positions, {result.init_positions})")
    print("continue pretraining with:\n  " + continue_command(result.train_flags()) + " ...")
    print(f"train only the new positions: add --train-new-positions-only {result.roberta_positions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
