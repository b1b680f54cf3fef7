"""The paper's char-LM ablation (its Table 4), in small, on the bundled corpus, on CPU.

Beltagy et al. (2020), Table 4, small model on text8 after 150K steps, dev BPC:

    Decreasing w (from 512 to 32)     1.24
    Fixed w (= 230)                   1.23
    Increasing w (from 32 to 512)     1.21
    No dilation                       1.21
    Dilation on 2 heads               1.20

(the last two rows both have increasing windows). Here, scaled down to about 20 minutes of two
free CPU cores:

  1. the KJV corpus (data/kjv, 4.2M characters) at character level with
     ``longformer-preprocess-chars --format chars`` (the last 5% of the characters are valid);
  2. four ``longformer_lm`` models of LAYERS layers trained from scratch, SEEDS seeds each, every
     run with the same data, sequence length, batch, rate, number of updates and positions
     (``--positions``: the paper's relative ones by default, or learned):
       decreasing   windows from TOP down to BOTTOM (geometric, as the model's own
                    ``growing_windows``, reversed), no dilation
       fixed        every layer the mean of those windows, no dilation
       increasing   windows from BOTTOM up to TOP, no dilation
       + dilation   increasing, with the paper's dilation on 2 heads of the upper half of the
                    layers (``paper_dilation``: gaps 1..3, i.e. d = 2..4)
     All four have the same total window (the sum over layers), so the same number of
     attention scores; the stacked receptive field (sum of w * d) is the same for the first
     three and larger with dilation;
  3. every model scored identically with ``fairseq-eval-lm`` on the same valid characters,
     windows of SEQUENCE characters moving by SEQUENCE - CONTEXT, only the last characters of
     each scored, so every scored character has at least CONTEXT characters before it, more
     than any model's receptive field (``--context-window``); "Loss (base 2)" is bits per
     character.

Default scale (why): 4 layers of width 128 with windows 8 .. 64 (the paper's 12 layers with
32 .. 512; 4 layers are the fewest where "increasing" and "decreasing" differ in more than the
order of two windows), sequences of 512 characters, 8 per update, 300 updates (1.2M characters,
about 0.3 of an epoch), 2 seeds, two runs at a time with one thread each: each training is about
2.5 minutes of one core with learned positions, 3-6 with relative ones, so about 12 / 20 minutes
of two free cores in all (measured: learned 56 minutes while other work kept the load at 15-20;
relative 33 minutes one run at a time beside a benchmark).
Every scored character has at least 256 characters of context: more than twice the stacked
receptive field without dilation (8 + 16 + 32 + 64 = 120), about that of the dilated heads
(8 + 16 + 2 * 32 + 3 * 64 = 280). Dropout 0: a run
sees less than one epoch, so there is nothing to regularise.

Output: the table (markdown) with each row's mean and spread over seeds (half the range, the
convention of ``longformer_experiments.runner``: with two seeds, each seed lies at mean +-
spread), one line saying whether the paper's ordering holds, ``OUT/ablation.md`` and
``OUT/ablation.json``. The exit status is nonzero only when a
run fails or a value is not a finite number, never because of the ordering.

    bash recipes/charlm_ablation.sh    # or: python -m longformer_experiments.charlm_ablation --out DIR
"""
