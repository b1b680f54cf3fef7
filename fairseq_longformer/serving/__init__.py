"""Serving what was trained here: ONNX graphs (``onnx_graph``, ``onnx_export``;
``longformer-export-onnx``). This project's attention inside a loaded transformers model is
``longformer_kernels.hf.accelerate`` (kernels/hf.py)."""
from .onnx_export import export_graph, export_onnx, graph_module

__all__ = ["export_graph", "export_onnx", "graph_module"]
