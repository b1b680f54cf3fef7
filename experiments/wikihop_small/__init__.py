"""The paper's WikiHop ablation (Beltagy et al. 2020, Table 10) in small, on CPU, with the real
WikiHop pipeline: qangaroo-format records -> ``longformer-prepare-task wikihop`` -> task and
criterion ``longformer_wikihop`` through ``fairseq-train``.

The paper (WikiHop dev accuracy, differences to Longformer): no separate global projections
-1.6; no global attention -8.3.

The task, from the bundled KJV (the needle documents of ``global_ablation.needles``): the
supports are one document of consecutive KJV sentences naming none of ``NAMES``, with
``--needles`` sentences inserted that each name the same one of them; the candidates are that
name and ``--candidates`` - 1 others, in NAMES' order (``--shuffle``: a random order); the
question is the fixed query ``named_in_supports``. Every needle starts at word ``--min-word`` or later, by default the
receptive field of the candidates without global attention (layers x window tokens after the
last prefix token): a candidate's ``[ent]`` token cannot see the needles through the windows,
only through global attention. This is one hop (find the candidate's name far away), not
WikiHop's chains of documents; what it isolates is the paper's claim that candidates need
global attention to reach the evidence.

Why NAMES' order by default: with shuffled candidates each ``[ent]`` must compare its own name
with the names in the supports, and the 2-layer models trained from scratch here stayed at
chance loss for 300-700 updates (3 and 2 candidates, 800 or 3200 questions, lr 1e-3 and 3e-3;
with 800 questions the training loss fell after ~550 updates while valid stayed at chance:
memorised). In a fixed order each ``[ent]`` slot learns which name it stands for, and what it
needs from the supports is only reachable through global attention, as in the paper's ablation.

Rows, each from scratch for ``--updates`` updates per seed, scored on valid after the last update:
  global                      --global-classes question,candidate (own Q_g, K_g, V_g)
  global (shared Q/K/V)       the same with --no-global-projections
  no global                   --global-attention none

Output: OUT/table.md and OUT/table.json; ``--write-docs`` also writes docs/results/wikihop_small.md.
Seeds summarised as mean ± spread (half the range) with min and max (``runner``).
"""
