"""longformer_tools.gpu: the GPU tooling of the attention core, kept out of ``longformer_kernels``.

    gpu_check.py      self-check on a GPU (``python -m longformer_tools.gpu.gpu_check OUTDIR``;
                      ``bash scripts/gpu_check.sh OUTDIR`` from a bare repository)
    gpu_bench.py      its benchmark against dense SDPA and FlexAttention
    gpu_tune.py       the tile sweep on a GPU (``python -m longformer_tools.gpu.gpu_tune OUTDIR``)
    compile_table.py  every Triton kernel compiled for real GPUs on a CPU (``seed_page``: its page)
    leases/           the scripts of past GPU leases (their data: docs/results/gpu_h200/)

Needs torch, triton, ``longformer_kernels`` and ``longformer_tools.flops`` only (no fairseq), so
that a bare GPU image with the repository on PYTHONPATH runs it. Importing this package imports
nothing: each module loads torch itself.
"""
