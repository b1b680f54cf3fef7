"""``longformer-prepare-task``: fine-tuning data as fairseq binaries whose ids match a pretrained
model's dictionary. One reader module per published format (``imdb``, ``hyperpartisan``,
``triviaqa``, ``arxiv``, and the project's own JSON lines in ``jsonl``), each yielding examples of
one of three shapes (``examples``); ``writers`` binarizes them; ``cli`` is the command."""
