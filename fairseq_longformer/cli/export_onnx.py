"""``longformer-export-onnx SOURCE OUTDIR``: a fairseq Longformer / LED checkpoint or a Hugging Face
folder -> ONNX graphs (encoder with its MLM, classification or QA head; the LED encoder), inputs
input_ids, attention_mask, global_attention_mask with dynamic batch and length. See
fairseq_longformer/serving/onnx_export.py (and onnx_graph.py for the graph itself).
"""
import argparse
import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from . import add_trust_flag, folder_parser, run_converter


def build_parser() -> argparse.ArgumentParser:
    parser = folder_parser(
        "longformer-export-onnx",
        "Export a fairseq Longformer/LED checkpoint or a Hugging Face Longformer/LED folder to ONNX "
        "(one graph per part; dynamic batch and length; global attention mask as an input).",
        "source", "fairseq checkpoint (.pt, or a folder holding model.pt) or Hugging Face folder (config.json)")
    parser.add_argument("--dict", dest="dict_path", metavar="DICT_TXT",
                        help="fairseq checkpoint: the dict.txt it was trained with (default: as longformer-export-hf)")
    parser.add_argument("--head-name", metavar="NAME", help="fairseq checkpoint with several heads: the one to export")
    parser.add_argument("--encoder-only", action="store_true",
                        help="fairseq checkpoint: leave task heads out, export the encoder with its LM head")
    parser.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    parser.add_argument("--dynamo", action="store_true",
                        help="use torch's torch.export-based exporter instead of the TorchScript one (slower to "
                             "export, same graph outputs; see onnx_export.py)")
    add_trust_flag(parser)
    return parser


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def convert():
        from ..serving.onnx_export import export_onnx

        return export_onnx(args.source, args.outdir, args.overwrite, args.dict_path, args.head_name,
                           args.encoder_only, args.opset, args.dynamo)

    try:
        result = run_converter("longformer-export-onnx", convert, args.trust_checkpoint)
    except (ImportError, FileExistsError) as error:
        print(f"longformer-export-onnx: error: {error}", file=sys.stderr)
        return 2
    if result is None:
        return 2
    for stem, path in result.graphs.items():
        print(f"wrote {path} ({result.architecture}: {stem})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
