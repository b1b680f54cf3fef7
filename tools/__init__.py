"""longformer_tools: the programs beside the plugin, installed as ``longformer_tools`` (a generic
top-level name such as ``tools`` belongs to other distributions on PyPI).

    bench/    the benchmarks: self-attention against sequence length (the paper's Figure 1), the
              LED encoder against BART's dense one, a char-LM training step against dense attention
    report/   the end of a masked-LM training job: unigram baselines, the training log, the BPC
              plot, a fill-mask demo
    cli/      their console scripts: longformer-bench, longformer-bench-led, longformer-bench-lm,
              longformer-report

The tools build on the plugin's public names only (``fairseq_longformer``'s package exports, its
registered fairseq architectures, ``fairseq_longformer.conversion``'s exports) and on
``longformer_kernels``; nothing in the plugin imports them.
"""
