"""The Longformer attention core, installed as ``longformer_kernels``; it imports no fairseq.

    pattern.py          the semantics: AttentionPattern (static), AttentionMasks (per batch)
    dropout.py          the attention-dropout keep mask, a pure function of (seed, b, h, i, j)
    fused_keep.py       that mask applied in one native pass on CPU (numba, optional)
    buffer_pool.py      large CPU buffers kept from one call for the next (no refaulting)
    reference.py        the slow exact oracle (float64, dense)
    sliding_chunks.py   the vectorized PyTorch path (CPU and GPU, memory linear in N)
    band_layout.py      where that path puts query chunks, key windows and dropout masks
    global_keys.py      that path's global keys, merged with the band by log-sum-exp
    dilation_residues.py  dilated heads as undilated residue subsequences
    triton_tiles.py     the Triton kernels' tiles and the list of every launch configuration
    triton_attention.py the Triton host side: layout, launchers, autograd,
                        ``triton_longformer_attention`` (imported on first use)
    triton_device.py    the Triton kernels, forward and backward (@triton.jit device code)
    api.py              one entry point, ``longformer_attention(..., impl=...)``

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D) -> (B, H, N, D). The fairseq plugin
(``fairseq_longformer``) builds on this package; this package never imports the plugin. Its GPU
checks, benchmarks, tile sweep, compile table and FLOP count are tooling: ``longformer_tools.gpu``
and ``longformer_tools.flops``. That tooling reaches the kernels through three exported modules,
``triton_attention``, ``triton_tiles`` and ``triton_device`` (loaded on first use, like triton).
Importing it does not import triton: ``triton_longformer_attention`` and the kernel module load
on first use. On a machine without CUDA set TRITON_INTERPRET=1 before that first use (Triton's
CPU interpreter reads it when the kernels are decorated).
"""
from .api import IMPLEMENTATIONS, longformer_attention, resolve_implementation
from .dropout import AttentionDropout
from .fused_keep import fused_dropout_mask
from .pattern import AttentionMasks, AttentionPattern, band_bias_width, parse_dilation, parse_per_layer
from .reference import reference_attention
from .sliding_chunks import sliding_chunks_attention

__all__ = [
    "AttentionDropout", "AttentionMasks", "AttentionPattern", "IMPLEMENTATIONS", "band_bias_width", "block_config",
    "fused_dropout_mask", "longformer_attention", "parse_dilation", "parse_per_layer", "reference_attention",
    "resolve_implementation", "sliding_chunks_attention", "triton_attention", "triton_device",
    "triton_longformer_attention", "triton_tiles",
]
# the kernel modules the GPU tooling (longformer_tools.gpu) drives: compile, sweep tiles, read launch lists
KERNEL_MODULES = ("triton_attention", "triton_device", "triton_tiles")


def __getattr__(name):
    # Triton is heavy to import and absent on some machines: load the kernels when first asked.
    if name == "triton_longformer_attention":
        from . import triton_attention

        return triton_attention.triton_longformer_attention
    if name in KERNEL_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name == "block_config":  # the tiles a kernel gets
        from . import triton_tiles

        return triton_tiles.block_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
