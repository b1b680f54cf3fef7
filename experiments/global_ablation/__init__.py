"""The paper's WikiHop ablation of global attention (Beltagy et al. 2020, Table 10), in small,
on CPU: does <s> need global attention to classify a document by what lies far from it?

The paper (WikiHop dev accuracy, differences to Longformer): global attention through the local
Q, K, V instead of its own projections -1.6; no global attention (nor projections) -8.3, below
RoBERTa-base reading only its 512 tokens. Without global attention the model is clearly worst.

The task (``build_examples``), from the bundled corpus: a document is up to ``--doc-words`` words
of consecutive KJV sentences that name none of ``NAMES`` (about 500 tokens at 300 words), with
``--needles`` corpus sentences inserted that each name the same one of them; the label is that
name (four balanced classes, chance 25%). Every needle starts at word ``--min-word`` or later
(uniformly over the sentence boundaries there), by default the receptive field of <s> without
global attention: with L layers and a one-sided window w, <s> sees tokens 0 .. L x w after L
layers (``receptive_field``), and word i is token i + 1 or later (<s> first, each word at least
one token). The rest of the document says nothing about the label: without global attention <s>
cannot do better than chance, by construction; the table shows that the implementation does
keep it so, and that with global attention <s> learns to read the whole document. Train and
valid documents come from different chapters (kjv.split_of), needles too.

Rows, each trained from scratch for ``--updates`` updates with each seed, scored on valid after
the last update (no best-of selection):
  global                 --global-attention task: <s> global, with its own Q_g, K_g, V_g
  global (shared Q/K/V)  --no-global-projections: <s> global through the local Q, K, V
  no global              --global-attention none: local attention only
  RoBERTa-length         the input cut to --short tokens (256: about half a document) with full
                         attention over them (window = --short), no global token: it sees the
                         label only in documents with a needle inside its input

Check (exit status 1 when it fails): every seed of "no global" is below every seed of every other
row. "global (shared Q/K/V)" against "global" is reported, not checked (the paper: -1.6).

Seeds are summarised as everywhere in ``longformer_experiments``: mean ± spread (half the range)
with min and max (``runner``'s docstring says why).

Output: OUT/ablation.md and OUT/ablation.json (the table, per-seed accuracies, runtimes), logs
under OUT/logs, data under OUT/json and OUT/data (binaries reused while the JSON lines are the
same). ``recipes/global_ablation.sh`` runs it with environment-variable settings
(``python -m longformer_experiments.global_ablation`` directly). Modules: ``needles`` (the task),
``main`` (the runs, the table and the check).
"""
