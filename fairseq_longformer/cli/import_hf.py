"""``longformer-import-hf HF_DIR OUTDIR``: a Hugging Face Longformer or RoBERTa-family (RoBERTa,
XLM-R, CamemBERT, RobertaForMaskedLM-shaped) folder -> a fairseq checkpoint (OUTDIR/model.pt, with
the cfg ``fairseq-train --restore-file`` reads) and its dictionaries, fairseq ids == HF ids: a
masked LM (OUTDIR/dict.txt), a sequence-classification (task longformer_classification:
input0/dict.txt, label/dict.txt) or question-answering folder (longformer_qa). An LED folder
becomes an LED checkpoint (task translation). A RoBERTa gets its positions extended to
--max-positions (default 4096, rows tiled as in the paper) and global projections copied from Q,
K, V; a Longformer keeps its window (HF's attention_window // 2). See
fairseq_longformer/conversion/hf_import.py.
"""
import argparse
import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from . import folder_parser, run_folder_command

OPTIONS = (
    ("--max-positions", dict(type=int, metavar="N", help="tokens of the fairseq model (default: the source's for a "
                             "Longformer, 4096 for RoBERTa); more than the source's extends the position table by "
                             "copying")),
    ("--attention-window", dict(metavar="W", help="RoBERTa only: ONE-sided window w, one value or one per layer "
                                "(default 256, HF's 512)")),
    ("--head-name", dict(metavar="NAME", help="fairseq name of the imported classification / QA head (default: the "
                         "task's, sentence_classification_head / qa)")),
)


def build_parser() -> argparse.ArgumentParser:
    return folder_parser(
        "longformer-import-hf",
        "Import a Hugging Face Longformer/RoBERTa (masked LM, sequence classification or question answering) "
        "as a fairseq Longformer checkpoint.",
        "hf_dir", "Hugging Face model folder (config.json + model.safetensors)", OPTIONS)


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return run_folder_command("longformer-import-hf", args.outdir, args.overwrite, [args.hf_dir],
                              lambda: _import(args))


def _import(args) -> int:
    from ..conversion.fairseq_sources import generate_command
    from ..conversion.hf_import import LEDImportResult, import_folder
    from ..conversion.fairseq_checkpoint import continue_command

    result = import_folder(args.hf_dir, args.outdir, args.overwrite, max_positions=args.max_positions,
                           attention_window=args.attention_window, head_name=args.head_name)
    led = isinstance(result, LEDImportResult)
    print(f"wrote {result.checkpoint} and {result.dictionary} ({'LED, ' if led else ''}"
          f"dictionary: {result.dictionary_source})")
    if led:
        print("fine-tune with:\n  " + continue_command(result.train_flags()) + " ...")
        print("generate with:\n  " + generate_command(result) + " ...")
        return 0
    if result.dictionary_source == "tokenizer.json":  # sentencepiece pieces, in the tokenizer's id order
        print(f"binarize text with: longformer-preprocess ... --sentencepiece-model <the folder's sentencepiece "
              f".model> --srcdict {result.dictionary}")
    print("continue training with: " + continue_command(result.train_flags()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
