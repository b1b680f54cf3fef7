"""Serving what was trained here: ONNX graphs (``onnx_graph``, ``onnx_export``;
``longformer-export-onnx``). This project's attention inside a loaded transformers model is
``longformer_kernels.hf.accelerate`` (kernels/hf.py)."""
