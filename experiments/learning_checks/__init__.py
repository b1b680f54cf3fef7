"""Learning checks: every fine-tuning head shown to learn on a small task made from the bundled KJV,
beside its controls, and the paper's orderings where a small task can show them.

    python -m longformer_experiments.learning_checks --write-docs [--only NAME ...]

Checks (one page each, docs/results/learning_NAME.md), each a small Longformer trained from scratch
on 2 CPU cores, with a pass criterion stated on the page before the numbers and checked here (exit
status 1 when one is missed):
  classification  needle documents, 4 names      >= 20 points above the majority class
  qa              "Where dwelt X?" / "Where was Y born?" / "Where died Z?" over KJV text holding one
                  fact per relation: >= 20 points F1 above a random town of the context
  wikihop         needle supports, 4 candidates   >= 20 points above a random candidate
  hotpotqa        stage one: >= 90% of the gold paragraphs kept while keeping fewer than all;
                  stage two: answer F1 >= 20 points above a random name of the right type, beside
                  the gold-selection oracle
  coref           documents whose antecedents lie within one segment: CoNLL F1 >= 60, beside the
                  string-match baseline
Orderings (3 seeds, mean ± spread as runner.py; a gap inside the spread is "undetermined"):
  coref_ordering, wikihop_ordering, and hotpotqa's own ordering page (two stages against one).
The load average is sampled while training runs; a page whose training saw more than 3 says so.
"""
