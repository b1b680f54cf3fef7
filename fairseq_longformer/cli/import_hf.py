"""``longformer-import-hf HF_DIR OUTDIR``: a Hugging Face Longformer or RoBERTa-family (RoBERTa, XLM-R,
CamemBERT, RobertaForMaskedLM-shaped) masked-LM folder ->
a fairseq checkpoint (OUTDIR/model.pt, with the cfg fairseq's checkpoint_utils and
``fairseq-train --restore-file`` read) and OUTDIR/dict.txt, with fairseq ids == HF ids. A
sequence-classification or question-answering folder becomes a checkpoint of task
longformer_classification (OUTDIR/input0/dict.txt, OUTDIR/label/dict.txt) or longformer_qa.

An LED folder (model_type "led", LEDForConditionalGeneration) becomes an LED checkpoint
(arch led_base / led_large, task translation).

A RoBERTa gets its positions extended to --max-positions (default 4096, rows tiled as in the
paper) and global projections copied from Q, K, V. A Longformer keeps its window (HF's two-sided
attention_window // 2). See fairseq_longformer/conversion/hf_import.py and conversion/families/.
"""
import argparse
import logging
import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from . import folder_parser


def build_parser() -> argparse.ArgumentParser:
    parser = folder_parser(
        "longformer-import-hf",
        "Import a Hugging Face Longformer/RoBERTa (masked LM, sequence classification or question answering) "
        "as a fairseq Longformer checkpoint.",
        "hf_dir", "Hugging Face model folder (config.json + model.safetensors)",
    )
    parser.add_argument("--max-positions", type=int, metavar="N",
                        help="tokens of the fairseq model (default: the source's for a Longformer, 4096 for "
                             "RoBERTa); more than the source's extends the position table by copying")
    parser.add_argument("--attention-window", metavar="W",
                        help="RoBERTa only: ONE-sided window w, one value or one per layer (default 256, "
                             "HF's 512)")
    parser.add_argument("--head-name", metavar="NAME",
                        help="fairseq name of the imported classification / QA head (default: the task's, "
                             "sentence_classification_head / qa)")
    return parser


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from ..conversion.fairseq_sources import generate_command
    from ..conversion.hf_import import LEDImportResult, import_folder
    from ..conversion.restore import continue_command

    from longformer_common.atomic import check_output_dir

    try:
        check_output_dir(args.outdir, args.overwrite, inputs=[args.hf_dir])  # --overwrite never deletes the source
        result = import_folder(args.hf_dir, args.outdir, args.overwrite, max_positions=args.max_positions,
                               attention_window=args.attention_window, head_name=args.head_name)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"longformer-import-hf: error: {error}", file=sys.stderr)
        return 2
    if isinstance(result, LEDImportResult):
        print(f"wrote {result.checkpoint} and {result.dictionary} (LED, dictionary: {result.dictionary_source})")
        print("fine-tune with:\n  " + continue_command(result.train_flags()) + " ...")
        print("generate with:\n  " + generate_command(result) + " ...")
        return 0
    print(f"wrote {result.checkpoint} and {result.dictionary} (dictionary: {result.dictionary_source})")
    if result.dictionary_source == "tokenizer.json":  # sentencepiece pieces, in the tokenizer's id order
        print(f"binarize text with: longformer-preprocess ... --sentencepiece-model <the folder's sentencepiece "
              f".model> --srcdict {result.dictionary}")
    print("continue training with: " + continue_command(result.train_flags()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
