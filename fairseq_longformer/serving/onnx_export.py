"""``longformer-export-onnx``: a fairseq checkpoint or a Hugging Face folder -> one ONNX graph
per model part, each taking input_ids, attention_mask, global_attention_mask (B, N) int64 with
batch and length dynamic (``onnx_graph`` pads to the window multiple inside the graph):

* a Longformer: ``encoder_mlm.onnx`` (logits (B, N, V)), ``encoder_classification.onnx``
  (logits (B, L)) or ``encoder_qa.onnx`` (start_logits, end_logits (B, N)), by its head;
* an LED: ``led_encoder.onnx`` (last_hidden_state (B, N, C)). The decoder is not exported: it is
  BART's dense decoder with cross-attention and a KV cache (optimum's seq2seq export covers that
  design, not this one).

A fairseq checkpoint goes through ``longformer-export-hf``'s conversion first (into a temporary
folder), so the graph holds exactly the weights the HF export holds.

Exporter: torch's TorchScript-based ``torch.onnx.export(..., dynamo=False)`` by default, chosen
over the torch.export-based one that torch >= 2.9 defaults to: on this graph both give the same
outputs (checked by hand), but the dynamo path took over an order of magnitude more CPU time to
export a 2-layer model (most of it in its graph passes) and needs onnxscript; the trace is
safe here because the graph modules hold no Python branch on data or shapes (padding and the
number of global tokens are computed in the graph), which the tests check by running one export
at every length and batch. ``dynamo=True`` (``--dynamo``) is kept for when the TorchScript
exporter is removed.
"""
import importlib.util
import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from longformer_common.atomic import check_output_dir, staged_folder

logger = logging.getLogger(__name__)

INPUTS = ("input_ids", "attention_mask", "global_attention_mask")
# transformers architecture -> (graph file stem, output names)
PARTS = {
    "LongformerForMaskedLM": ("encoder_mlm", ("logits",)),
    "LongformerForSequenceClassification": ("encoder_classification", ("logits",)),
    "LongformerForQuestionAnswering": ("encoder_qa", ("start_logits", "end_logits")),
    "LEDForConditionalGeneration": ("led_encoder", ("last_hidden_state",)),
}
DEFAULT_OPSET = 18
# the graph pads by a size computed in it (Pad with a tensor of sizes: opset 11); torch's TorchScript
# exporter writes at most opset 20 (torch.onnx's ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET)
OPSETS = range(11, 21)


@dataclass
class OnnxExportResult:
    out_dir: Path
    graphs: Dict[str, Path]  # file stem -> path
    architecture: str


def load_source(source, dict_path=None, head_name: Optional[str] = None, encoder_only: bool = False):
    """The transformers model of ``source``: a HF folder (config.json) as it is, or a fairseq
    checkpoint converted by ``longformer-export-hf``'s code into a temporary folder."""
    import transformers

    source = Path(source)
    if source.is_dir() and (source / "config.json").is_file():
        from ..conversion.hf_import import check_folder

        check_folder(source)  # transformers loads what it is given: the import's checks first
        return _from_folder(transformers, source)
    from ..conversion.hf_export import export_checkpoint

    with tempfile.TemporaryDirectory() as scratch:
        export_checkpoint(source, Path(scratch) / "hf", dict_path, head_name=head_name, encoder_only=encoder_only)
        return _from_folder(transformers, Path(scratch) / "hf")


def _from_folder(transformers, folder: Path):
    config = transformers.AutoConfig.from_pretrained(folder)
    architecture = (config.architectures or [None])[0]
    if architecture is None:
        raise ValueError(f"{str(folder / 'config.json')!r} names no model class (no \"architectures\"): add e.g. "
                         f"\"architectures\": [\"LongformerForMaskedLM\"] for the folder's head (one of {', '.join(PARTS)})")
    if architecture not in PARTS:
        raise ValueError(f"{str(folder)!r} is a {architecture}: longformer-export-onnx writes "
                         f"{', '.join(PARTS)} (a Longformer with its head, or an LED)")
    return getattr(transformers, architecture).from_pretrained(folder).eval()


def graph_module(model):
    """(file stem, graph module, output names) of a loaded transformers model."""
    from .onnx_graph import LEDEncoderGraph, LongformerGraph

    stem, outputs = PARTS[type(model).__name__]
    module = LEDEncoderGraph(model) if stem == "led_encoder" else LongformerGraph(model)
    return stem, module.eval(), outputs


def example_inputs(multiple: int, vocab: int) -> Tuple[torch.Tensor, ...]:
    """Two rows, not a window multiple long, padding in one, a global token in the other: the
    trace sees every path (the graph has no branch, this only keeps shapes generic)."""
    length = 2 * multiple + 3
    ids = torch.randint(4, max(5, vocab), (2, length))
    attention = torch.ones_like(ids)
    attention[1, length - 5:] = 0
    glob = torch.zeros_like(ids)
    glob[0, 0] = 1
    return ids, attention, glob


def export_graph(module, outputs, path: Path, vocab: int, opset: int = DEFAULT_OPSET, dynamo: bool = False) -> None:
    """Write ``module`` (an ``onnx_graph`` module) to ``path`` with dynamic batch and length."""
    inputs = example_inputs(module.inputs.multiple, vocab)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        if dynamo:
            from torch.export import Dim

            batch, length = Dim("batch"), Dim("length")
            torch.onnx.export(module, inputs, str(path), dynamo=True, input_names=list(INPUTS),
                              output_names=list(outputs), opset_version=opset,
                              dynamic_shapes={name: {0: batch, 1: length} for name in INPUTS})
        else:
            axes = {name: {0: "batch", 1: "length"} for name in (*INPUTS, *outputs)}
            torch.onnx.export(module, inputs, str(path), dynamo=False, input_names=list(INPUTS),
                              output_names=list(outputs), dynamic_axes=axes, opset_version=opset)


def export_onnx(source, out_dir, overwrite: bool = False, dict_path=None, head_name: Optional[str] = None,
                encoder_only: bool = False, opset: int = DEFAULT_OPSET, dynamo: bool = False) -> OnnxExportResult:
    """``longformer-export-onnx``: every graph of ``source`` into ``out_dir`` (written whole or not
    at all), with the model's config.json beside them."""
    try:
        import onnx  # noqa: F401
    except ImportError as error:
        raise ImportError(f"ONNX export needs onnx (pip install 'fairseq-longformer[onnx]'): {error}") from error
    if opset not in OPSETS:  # refused before anything is loaded (torch would fail late, printing its graph)
        raise ValueError(f"--opset {opset}: longformer-export-onnx writes opsets {OPSETS[0]} to {OPSETS[-1]} (the "
                         f"graph needs {OPSETS[0]}, torch's exporter stops at {OPSETS[-1]}): e.g. --opset {DEFAULT_OPSET}")
    if dynamo and importlib.util.find_spec("onnxscript") is None:
        raise ImportError("--dynamo: torch's torch.export-based exporter needs onnxscript: pip install onnxscript "
                          "(or leave --dynamo out: the default exporter writes the same graph)")
    check_output_dir(out_dir, overwrite, [source])
    model = load_source(source, dict_path, head_name, encoder_only)
    stem, module, outputs = graph_module(model)
    graphs: Dict[str, Path] = {}
    with staged_folder(out_dir, overwrite, [source]) as tmp:
        export_graph(module, outputs, tmp / f"{stem}.onnx", model.config.vocab_size, opset, dynamo)
        model.config.to_json_file(str(tmp / "config.json"))
        graphs[stem] = Path(out_dir) / f"{stem}.onnx"
    logger.info(f"wrote {', '.join(str(p) for p in graphs.values())}")
    return OnnxExportResult(Path(out_dir), graphs, type(model).__name__)
