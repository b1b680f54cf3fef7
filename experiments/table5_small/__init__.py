"""The shape of the paper's Table 5 (MLM BPC of continued pretraining), in small, on CPU.

Beltagy et al. (2020), Table 5, base models, MLM bits per token on held-out data:

    RoBERTa (seqlen 512)                      1.846
    Longformer (seqlen 4,096), random pos.   10.299
      + copy position embeddings              1.957
      + 2K gradient updates                   1.753
      + 65K gradient updates                  1.705
    Longformer (train extra pos. embed. only) 1.850

Here, scaled down to fit about 15-25 minutes of two shared CPU cores:

  1. the bundled KJV corpus, lower-cased, tokenized with a sentencepiece BPE model of 256 pieces
     trained on the training books (``--tokenizer word`` keeps the most frequent words instead);
     every 10th book is held out as the validation set;
  2. a small RoBERTa (2 layers, 64 wide) pretrained with stock fairseq (``--arch roberta_base
     --task masked_lm``) on blocks of L tokens;
  3. ``longformer-convert-roberta`` to 4L positions with one-sided window w = L/2 (the paper's
     window of 512 over RoBERTa's 512 tokens, two-sided), with random and with copied positions;
  4. continued MLM pretraining of the copy-initialised model on blocks of 4L (one run, scored
     after a few hundred and after a few thousand updates), and a run that trains only the new
     position rows (``--train-new-positions-only L``);
  5. every model scored on the same held-out books, each at its own length: bits per masked
     token (fairseq's seeded 15 % masking, so the Longformer rows share their masks).

Why L = 32 and not 128: the table only has its shape when RoBERTa relies on its positions
(otherwise random positions cost nothing). Measured here, a model this small sits on the MLM
plateau (unigram loss, positions unused) for a long time, and the longer the block the longer:
with 1,024 tokens per update it was still there after 2,000 updates at L = 128 and 64, left it
after about 3,500 at L = 32 and after about 1,200 at L = 16. Shorter is not better either: the
copied table repeats every L positions, and the fraction of tokens near a tile boundary (where
the copy differs from what RoBERTa saw) grows as L shrinks; at L = 16 the copy lost 1.0 bit to
RoBERTa (random: 2.5).

Tokens per update: RoBERTa L x (BATCH_TOKENS / L) = BATCH_TOKENS, Longformer 4L x
(BATCH_TOKENS / 4L) = BATCH_TOKENS (default 1,024 = 32 x 32 = 128 x 8): every run sees the
same number of token positions per update.

Every training runs as its own ``fairseq-train`` process with one intra-op thread (on a shared
two-core machine, two OpenMP threads per process were 15x slower than one here); the
continued-pretraining run goes in parallel with the others. Output: ``OUT/table5.md``,
``OUT/table5.json`` and the logs of each run under ``OUT/logs``; the exit status is 1 when the
table does not have the paper's shape (``REQUIRED_CHECKS``: the copy closer to RoBERTa than
random positions, and five times closer once the tile starts are set apart; continued
pretraining better than the copy).

Tile starts: with the copied table, block positions L, 2L, 3L get RoBERTa's first position,
which only ever held <s> during pretraining; the copy-initialised model predicts <s> there
(about 20 bits per such token, measured). The paper copies the same way (so do Hugging Face's
and allenai's conversion scripts), but at L = 512 and 4,096 tokens those are 7 tokens in 4,096;
at L = 32 they are 3 in 128 and dominate the copy's loss, so the table shows BPC with and
without them.

    bash recipes/table5_small.sh     # or: python -m longformer_experiments.table5_small --out DIR

It drives fairseq-train, longformer-convert-roberta's ``convert_roberta_checkpoint`` and
fairseq's checkpoint loader from outside. Modules: ``data`` (the corpus), ``scoring`` (bits per
masked token), ``table`` (the rows, the paper's numbers, the shape checks), ``main`` (the runs).
"""
