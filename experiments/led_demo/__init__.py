"""The data and the scores of recipes/led_demo.sh (the LED seq2seq demo on the bundled KJV).

  python -m longformer_experiments.led_demo build WORK [--kjv data/kjv] [--positions 512] ...
  python -m longformer_experiments.led_demo score WORK --system NAME=GENERATE_LOG ...

build: the task, "give the closing sentence of this passage".
  A passage is a run of whole consecutive sentences of one book (chapter headings dropped),
  between 2 and 3 times --positions sentencepiece tokens long (the length drawn at random per
  passage, so the end does not sit at one fixed position); the target is its last sentence, one
  of 6 to 30 words. The passages of a book do not overlap, and a book goes to exactly one split
  (--valid-books / --test-books of the 66, taken at even steps through the Bible; the rest
  train), so no test sentence was seen in training.

  Why this task: the answer sits at the far end of a source 2-3 times longer than the BART's
  positions, so a lead baseline (the first sentence) shares only the corpus's common words with
  it, and the BART, which sees only the first --positions tokens, never sees it at all; a small
  model learns it on CPU in minutes, because finding "the sentence that ends at </s>" needs only
  the tokens near the end (inside the LED's local window) and copying is what a denoising BART
  has learnt already. It is not summarization, and a one-line rule (take the last sentence)
  solves it: it is a probe of whether the encoder reaches past BART's positions, nothing more.

  Writes, under WORK/data:
    spm.model              sentencepiece (--vocab pieces, unigram) trained on the train books
    pretrain/train.txt     train books, one sentence per line (as pieces), a blank line between
    pretrain/valid.txt     books (fairseq's document break): the denoising BART's corpus (valid:
                           the valid books); the test books are in neither
    {train,valid,test}.src / .tgt   the passages and their closing sentences, as pieces
    {split}.jsonl          the same as text: {"book", "source", "target", "source_tokens"}
    stats.json             counts and lengths

score: ROUGE-1/2/L F1 (Google's rouge-score, stemming on) of each system's hypotheses on test
  (parsed from fairseq-generate's H- lines, pieces joined back to text) against the targets, and
  of the lead baseline (the passage's first sentence); the ROUGE-L difference of each pair with a
  95% paired bootstrap interval (the test set is small: a gap inside the interval's reach of 0
  is noise); WORK/results.md and WORK/results.json.

Modules: ``task`` (build), ``score`` (score), ``main`` (the command line).
"""
