"""``longformer-export-hf CHECKPOINT OUTDIR``: a fairseq Longformer checkpoint -> a Hugging Face
folder (config.json, model.safetensors, fairseq_dict.txt, tokenizer files when a tokenizer is
given) that ``transformers.LongformerForMaskedLM.from_pretrained(OUTDIR)`` loads offline. A
fine-tuned checkpoint exports its head: ``LongformerForSequenceClassification`` (task
longformer_classification, labels from its label/dict.txt) or ``LongformerForQuestionAnswering``
(longformer_qa); ``--head-name`` picks one when the checkpoint holds several. A head without a
transformers class (HotpotQA's, WikiHop's) is refused with exit status 2 and nothing written;
``--encoder-only`` leaves the heads out and exports the rest as LongformerForMaskedLM. An LED
checkpoint (arch led_*, from longformer-convert-bart) exports as ``LEDForConditionalGeneration``.

The window is converted to HF's two-sided convention (2w per layer). Settings HF cannot represent
(dilation, causal attention, ...) stop the export with an error naming them; nothing is written
(the folder is assembled next to OUTDIR and renamed into place only when complete).
See fairseq_longformer/conversion/hf_export.py (the families: conversion/families/).
"""
import argparse
import logging
import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from ..runtime.checkpoints import trust_checkpoints
from . import add_trust_flag, folder_parser


def build_parser() -> argparse.ArgumentParser:
    parser = folder_parser(
        "longformer-export-hf",
        "Export a fairseq Longformer checkpoint to a Hugging Face folder (LongformerForMaskedLM, or the "
        "fine-tuned head: LongformerForSequenceClassification / LongformerForQuestionAnswering).",
        "checkpoint", "fairseq checkpoint (.pt), or a folder holding model.pt",
    )
    parser.add_argument("--dict", dest="dict_path", metavar="DICT_TXT",
                        help="the dict.txt the model was trained with (default: next to the checkpoint, "
                             "else in the checkpoint's data folder)")
    parser.add_argument("--label-dict", dest="label_dict_path", metavar="DICT_TXT",
                        help="classification: the label/dict.txt the model was trained with (default: "
                             "label/dict.txt next to the checkpoint, else in its data folder)")
    parser.add_argument("--head-name", metavar="NAME",
                        help="the head to export when the checkpoint holds several (a classification head's "
                             "--classification-head-name or a QA head's --span-head-name); default: the only one")
    parser.add_argument("--encoder-only", action="store_true",
                        help="leave the task heads out: the encoder and the LM head as LongformerForMaskedLM "
                             "(for a head no transformers class computes, e.g. longformer_hotpotqa's)")
    add_trust_flag(parser)
    tok = parser.add_argument_group("tokenizer (optional; the one the fairseq data was made with)")
    tok.add_argument("--gpt2-encoder-json", metavar="FILE", help="GPT-2 BPE encoder.json (RoBERTa's BPE)")
    tok.add_argument("--gpt2-vocab-bpe", metavar="FILE", help="GPT-2 BPE vocab.bpe (merges)")
    tok.add_argument("--sentencepiece-model", metavar="FILE", help="sentencepiece unigram .model")
    tok.add_argument("--hf-tokenizer", metavar="DIR",
                     help="a transformers tokenizer folder with the model's ids, carried as it is (the "
                          "hf_tokenizer/ folder longformer-import-hf wrote, e.g. XLM-R's)")
    return parser


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from longformer_common.atomic import check_output_dir

    inputs = [args.checkpoint, args.dict_path, args.label_dict_path, args.gpt2_encoder_json, args.gpt2_vocab_bpe,
              args.sentencepiece_model, args.hf_tokenizer]
    try:
        check_output_dir(args.outdir, args.overwrite, inputs)  # --overwrite never deletes what it reads
    except (ValueError, FileExistsError) as error:
        print(f"longformer-export-hf: error: {error}", file=sys.stderr)
        return 2
    with trust_checkpoints(args.trust_checkpoint):
        return _export(args)


def _export(args) -> int:
    from ..conversion.hf_export import export_checkpoint
    from ..conversion.tokenizer import TokenizerFiles

    tokenizer = TokenizerFiles(args.gpt2_encoder_json, args.gpt2_vocab_bpe, args.sentencepiece_model,
                               args.hf_tokenizer)
    try:
        result = export_checkpoint(args.checkpoint, args.outdir, args.dict_path, tokenizer, args.overwrite,
                                   args.head_name, args.label_dict_path, args.encoder_only)
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as error:
        print(f"longformer-export-hf: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {result.out_dir} ({result.config['architectures'][0]}, "
          f"attention_window {result.config['attention_window']}, "
          f"tokenizer: {result.tokenizer or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
