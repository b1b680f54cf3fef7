"""``longformer-bench``, the paper's Figure 1 on the machine at hand: a tool, not part of the
plugin (nothing in ``fairseq_longformer`` imports it). ``contenders`` (the four ways to compute the
same self-attention), ``measure`` (time and peak memory of one case in this process), ``workers``
(fresh processes, contenders timed side by side), ``report`` (ratios, table, plot). The console
script is ``fairseq_longformer/cli/bench.py``.
"""
