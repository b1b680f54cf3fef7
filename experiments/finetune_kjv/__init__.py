"""The fine-tuning demo's data: two small fine-tuning data sets from the bundled King James Bible
(data/kjv), as JSON lines for ``longformer-prepare-task``; chapters go to train or valid by a
seeded hash of their title (``kjv.split_of``, about 10% valid), so no valid passage comes from a
train chapter.

  classification: {"text": chapter, "label": the part of the Bible it is from} with six labels
                  (law, history, wisdom, prophets, gospels_acts, letters) by book number; a
                  chapter is about 900 tokens.
  qa:             "Which word comes right after NAME in this passage?"
                  {"question": NAME, "context": a passage of --passage-words words of a chapter,
                   "answers": [the word after NAME there, and its offset]}. NAME is one of the
                  corpus's --cue-names most frequent proper names (capitalised words never seen
                  in lower case: Moses, Egypt, Jerusalem), once in the passage; the passage names
                  at least one other of them, so the first name met is not the answer's cue; the
                  answer is a word of three letters or more outside the --common-words most
                  frequent ones. Up to --questions-per-passage per passage, passages a third of a
                  passage apart.

Why this QA task (measured with a 2-layer, 128-wide model trained from scratch on CPU): the
question tokens are global, so each passage token can compare itself with NAME; the answer is the
next word, so reading it needs only the neighbouring tokens. An earlier version (the word after a
four-word cue anywhere in a whole chapter) was not learnt in 300 updates, nor was a version whose
cue could be any word seen once in the chapter: matching an open vocabulary of cues from scratch
takes far longer than a closed set of names.

Baselines, printed for valid and written to baselines.json (exact match, %):
  qa_most_common_answer_em             the train answer seen most often
  qa_most_common_answer_in_context_em  the most frequent train answer that is in the passage
  qa_cue_bigram_em                     knows NAME, does not read: NAME's most frequent follower in
                                       the train chapters among the passage's words
  qa_word_after_first_name_em          reads, ignores the question: the word after the passage's
                                       first name from the cue list

Usage: python -m longformer_experiments.finetune_kjv OUT_DIR [--kjv data/kjv] [--passage-words 150]
       [--cue-names 100]   (recipes/finetune_kjv.sh makes the data with it, then fine-tunes)
"""
