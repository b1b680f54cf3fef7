"""``longformer-report``: the end of a masked-LM training job, for a person reading it.

    fairseq-train DATA ... --save-dir SAVE_DIR --log-format simple 2>&1 | tee -a SAVE_DIR/train.log
    longformer-report --data DATA --save-dir SAVE_DIR

Prints the first and last valid BPC against the valid set's unigram baselines (computed here
from the binaries), valid accuracy, training tokens per second and where the checkpoints are;
writes ``SAVE_DIR/bpc.png`` (train and valid BPC against updates) and prints a fill-mask demo
on held-out sentences through fairseq's hub interface. ``--expect-bits-below B`` exits 1 when
the last valid BPC is not B bits below the valid unigram entropy.
"""
import argparse
import logging
import sys
from pathlib import Path

from longformer_common.cli import one_line_errors


def parse_args(argv):
    p = argparse.ArgumentParser(prog="longformer-report", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, type=Path, help="the fairseq binary dataset (dict.txt, spm.model)")
    p.add_argument("--save-dir", required=True, type=Path, help="fairseq-train's --save-dir")
    p.add_argument("--log-file", type=Path, help="fairseq-train's output, format simple or json (default SAVE_DIR/train.log); "
                        "fairseq's own --log-file misses the train and valid lines, so save it with tee")
    p.add_argument("--checkpoint", default="checkpoint_best.pt", help="file in SAVE_DIR for the demo")
    p.add_argument("--valid-subset", default="valid")
    p.add_argument("--trust-checkpoint", action="store_true",
                   help="load a checkpoint that holds types other than tensors and fairseq's configuration "
                        "(runs code from the file: only for files you trust)")
    p.add_argument("--fill-mask", type=int, default=4, metavar="N", help="held-out sentences to fill (0: none)")
    p.add_argument("--train-seconds", type=float, help="wall time of training, printed when given")
    p.add_argument("--expect-bits-below", type=float, metavar="B",
                   help="exit 1 unless the last valid BPC is at least B bits below the unigram entropy")
    return p.parse_args(argv)


def _fill_mask(args):
    """The fill-mask demo's results; a refused or corrupt checkpoint ends the command in one line."""
    from fairseq_longformer import UserInputError, trust_checkpoints
    from ..report.fill_mask import fill_mask_demo

    try:
        with trust_checkpoints(args.trust_checkpoint):
            return fill_mask_demo(args.save_dir, args.checkpoint, args.data, args.valid_subset, args.fill_mask)
    except UserInputError as error:
        sys.exit(f"longformer-report: error: {error}")


@one_line_errors
def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # the report is for a person: fairseq's INFO lines (model config dumps, data loading) are not
    logging.basicConfig(level=logging.WARNING, force=True)
    from ..report.plot import plot_bpc
    from ..report.training_log import read_training_log
    from ..report.unigram import unigram_baseline

    if not (args.data / "dict.txt").is_file():
        sys.exit(f"longformer-report: error: --data {args.data}: no dict.txt there; give the fairseq binary "
                 "dataset the model was trained on")
    if args.fill_mask > 0 and not (args.save_dir / args.checkpoint).is_file():
        sys.exit(f"longformer-report: error: --checkpoint {args.save_dir / args.checkpoint}: no such file; give a "
                 "checkpoint in --save-dir (--checkpoint checkpoint_last.pt) or --fill-mask 0")
    log_file = args.log_file or args.save_dir / "train.log"
    if not log_file.is_file():
        sys.exit(f"longformer-report: no training log at {log_file}: save fairseq-train's output there "
                 f"(fairseq-train ... 2>&1 | tee -a {log_file}) or pass --log-file")
    log = read_training_log(log_file)
    valid = log.series("valid", "bpc")
    if not valid:
        sys.exit(f"longformer-report: {log_file} has no valid lines: train with --validate-interval-updates "
                 "and --log-format simple or json")
    base = unigram_baseline(args.data, args.valid_subset)
    demo = _fill_mask(args) if args.fill_mask > 0 else []  # before bpc.png: a refused checkpoint writes nothing
    acc = dict(log.series("valid", "acc"))
    (u0, first), (u1, last) = valid[0], valid[-1]
    wps = [w for _, w in log.series("train", "wps")]
    below = base.entropy - last

    print(f"\n== summary ({args.valid_subset}: {base.tokens:,} tokens) ==")
    print(f"unigram baselines (bits per token): {args.valid_subset}'s own entropy {base.entropy:.3f}; "
          f"train frequencies scored on {args.valid_subset} {base.cross_entropy_from_train:.3f}")
    print(f"valid BPC: {first:.3f} at update {u0} -> {last:.3f} at update {u1} "
          f"({abs(below):.2f} bits {'below' if below >= 0 else 'above'} the valid unigram entropy)")
    if u0 in acc and u1 in acc:
        print(f"valid accuracy (masked tokens): {acc[u0]:.1f}% -> {acc[u1]:.1f}%")
    if wps:
        print(f"training speed: {sum(wps) / len(wps):,.0f} tokens/s (mean over {len(wps)} logged intervals)")
    if args.train_seconds is not None:
        print(f"training time: {args.train_seconds / 60:.1f} min")
    print(f"checkpoints: {args.save_dir / 'checkpoint_best.pt'} (best valid BPC), {args.save_dir / 'checkpoint_last.pt'}")
    png = plot_bpc(log, base, args.save_dir / "bpc.png", title=f"masked-LM BPC ({args.save_dir.name})")
    print(f"plot: {png}")

    if args.fill_mask > 0:
        print(f"\n== fill-mask on held-out {args.valid_subset} sentences ({args.checkpoint}) ==")
        for item in demo:
            guesses = ", ".join(f"{w} ({p:.2f})" for w, p in item["predictions"])
            print(f"{item['masked']}\n    answer: {item['answer']}   model: {guesses}")

    if args.expect_bits_below is not None and below < args.expect_bits_below:
        print(f"longformer-report: the last valid BPC is {below:.2f} bits below the unigram entropy, "
              f"fewer than the {args.expect_bits_below} expected", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
