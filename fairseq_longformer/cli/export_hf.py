"""``longformer-export-hf CHECKPOINT OUTDIR``: a fairseq Longformer checkpoint -> a Hugging Face
folder (config.json, model.safetensors, fairseq_dict.txt, tokenizer files when a tokenizer is
given) that ``transformers.LongformerForMaskedLM.from_pretrained(OUTDIR)`` loads offline. A
fine-tuned checkpoint exports its head (``LongformerForSequenceClassification`` or
``LongformerForQuestionAnswering``; ``--head-name`` picks one of several); a head without a
transformers class (HotpotQA's, WikiHop's) is refused, ``--encoder-only`` leaves the heads out. An
LED checkpoint exports as ``LEDForConditionalGeneration``. Settings HF cannot represent stop the
export with an error naming them, nothing written. See fairseq_longformer/conversion/hf_export.py.
"""
import argparse
import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from . import add_options, add_trust_flag, folder_parser, run_folder_command

OPTIONS = (
    ("--dict", dict(dest="dict_path", metavar="DICT_TXT", help="the dict.txt the model was trained with (default: "
                    "next to the checkpoint, else in the checkpoint's data folder)")),
    ("--label-dict", dict(dest="label_dict_path", metavar="DICT_TXT", help="classification: the label/dict.txt the "
                          "model was trained with (default: label/dict.txt next to the checkpoint, else in its data "
                          "folder)")),
    ("--head-name", dict(metavar="NAME", help="the head to export when the checkpoint holds several (a "
                         "classification head's --classification-head-name or a QA head's --span-head-name); "
                         "default: the only one")),
    ("--encoder-only", dict(action="store_true", help="leave the task heads out: the encoder and the LM head as "
                            "LongformerForMaskedLM (for a head no transformers class computes, e.g. "
                            "longformer_hotpotqa's)")),
)
TOKENIZER_OPTIONS = (
    ("--gpt2-encoder-json", dict(metavar="FILE", help="GPT-2 BPE encoder.json (RoBERTa's BPE)")),
    ("--gpt2-vocab-bpe", dict(metavar="FILE", help="GPT-2 BPE vocab.bpe (merges)")),
    ("--sentencepiece-model", dict(metavar="FILE", help="sentencepiece unigram .model")),
    ("--hf-tokenizer", dict(metavar="DIR", help="a transformers tokenizer folder with the model's ids, carried as it "
                            "is (the hf_tokenizer/ folder longformer-import-hf wrote, e.g. XLM-R's)")),
)


def build_parser() -> argparse.ArgumentParser:
    parser = folder_parser(
        "longformer-export-hf",
        "Export a fairseq Longformer checkpoint to a Hugging Face folder (LongformerForMaskedLM, or the "
        "fine-tuned head: LongformerForSequenceClassification / LongformerForQuestionAnswering).",
        "checkpoint", "fairseq checkpoint (.pt), or a folder holding model.pt", OPTIONS)
    add_trust_flag(parser)
    add_options(parser.add_argument_group("tokenizer (optional; the one the fairseq data was made with)"),
                TOKENIZER_OPTIONS)
    return parser


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    inputs = [args.checkpoint, args.dict_path, args.label_dict_path, args.gpt2_encoder_json, args.gpt2_vocab_bpe,
              args.sentencepiece_model, args.hf_tokenizer]
    return run_folder_command("longformer-export-hf", args.outdir, args.overwrite, inputs, lambda: _export(args),
                              trust=args.trust_checkpoint)


def _export(args) -> int:
    from ..conversion.hf_export import export_checkpoint
    from ..conversion.tokenizer import TokenizerFiles

    tokenizer = TokenizerFiles(args.gpt2_encoder_json, args.gpt2_vocab_bpe, args.sentencepiece_model,
                               args.hf_tokenizer)
    result = export_checkpoint(args.checkpoint, args.outdir, args.dict_path, tokenizer, args.overwrite,
                               args.head_name, args.label_dict_path, args.encoder_only)
    print(f"wrote {result.out_dir} ({result.config['architectures'][0]}, "
          f"attention_window {result.config['attention_window']}, tokenizer: {result.tokenizer or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
