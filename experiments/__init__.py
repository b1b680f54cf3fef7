"""The paper's experiments in small, on the bundled corpus: one subpackage per table or demo,
each run as ``python -m longformer_experiments.<name>`` from the repository root (a shell entry
point in ``recipes/`` wraps most of them with environment-variable settings); their result tables
are in ``docs/results/``.

  table5_small     Table 5: MLM bits per token when continuing RoBERTa as Longformer
  charlm_ablation  Table 4: char-LM windows decreasing / fixed / increasing, dilation
  global_ablation  Table 10: a long-document classification with and without global attention
  led_demo         LED from a small BART, fine-tuned on sources longer than BART's positions
  finetune_kjv     the two fine-tuning tasks (classification, QA) and their trivial baselines
  hotpotqa_small   HotpotQA's two stages and two-paragraph evidence on KJV bridge questions
  checkpointing    peak memory of a forward + backward with and without activation checkpointing

``runner`` holds what they share (fairseq as subprocesses, log parsing, seed statistics, tables,
verdicts), ``kjv`` how they read the corpus. Experiments, not part of the plugin: they drive
fairseq's command-line tools and the plugin's public API from outside.
"""
