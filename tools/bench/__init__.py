"""The benchmarks, on the machine at hand. ``contenders`` (the four ways to compute the same
self-attention), ``measure`` (time and peak memory of one case in this process), ``workers``
(fresh processes, contenders timed side by side), ``ratios`` (ratios against the baselines and
the printed tables), ``matmul_limit`` (the machine's matmul limit at the layer's shapes, weighted
by the useful FLOPs of ``longformer_tools.flops``), ``figure1`` (the plot); whole models on the same machinery:
``led_encoder`` (the LED encoder against BART's), ``lm_step`` (a char-LM training step) and
``mlm_step`` (a masked-LM training step against transformers); ``results_page`` (the
markdown page of a stored run, headed by the command that regenerates it). The console scripts
are in ``longformer_tools.cli``.
"""
