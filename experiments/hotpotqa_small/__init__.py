"""HotpotQA's two stages and its evidence decoding in small, on CPU, with the real pipeline:
HotpotQA-format records made from the bundled KJV -> ``longformer-prepare-task hotpotqa`` ->
``fairseq-train`` (task and criterion ``longformer_hotpotqa``) -> ``longformer-select-paragraphs``
-> stage two prepared by the same reader and trained the same way.

The paper (its appendix): the two-stage model improves joint F1 over one stage by about 4.2
points on the dev set; evidence is decoded from exactly two paragraphs (Groeneveld et al. 2020).

The data (``data.py``), a bridge question per record over ``--paragraphs`` paragraphs titled by
a name, of two sentences each, a KJV clause then a fact: "Where dwelt the brother of Boaz?"; the
paragraph titled "Boaz" says "Boaz, who dwelt in Zoar, was the brother of Caleb." and the one titled
"Caleb" says "Caleb dwelt in Hebron." (Boaz's town is never the answer, so the two gold paragraphs
hold two towns); the other paragraphs name other brothers and other people's towns.
Supporting facts: those two fact sentences; the answer: the town.

Rows, each trained from scratch for ``--updates`` updates per seed, scored on every valid
question (a question stage two's reader drops counts 0) by ``longformer-select-paragraphs``:
  one stage  (evidence: threshold | two paragraphs)   stage one's model on all the paragraphs
  two stages (evidence: threshold | two paragraphs)   stage two's model on stage one's selection
Both decodings come from the same trained models (they differ only in decoding).

Output: OUT/table.md and OUT/table.json; ``--write-docs`` also writes docs/results/hotpotqa_small.md (``--docs-name``).
Seeds summarised as mean ± spread (half the range) with min and max (``runner``).
"""
