"""``longformer-prepare-task``: fine-tuning data as fairseq binaries whose ids match a pretrained
model's dictionary. One reader module per published format (``imdb``, ``hyperpartisan``,
``triviaqa``, ``arxiv``, ``wikihop``, ``hotpotqa``, and the project's own JSON lines in
``jsonl``), each yielding examples of one of five shapes (``examples``); ``writers`` (and
``multihop_writer`` for HotpotQA) binarizes them; ``cli`` is the command.
``conll2012`` reads and writes CoNLL-2012 coreference files (OntoNotes) as the official scorer does."""
