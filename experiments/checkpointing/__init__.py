"""Peak memory of one masked-LM forward + backward, with and without activation checkpointing.

Builds a Longformer through fairseq's builders (the model ``fairseq-train --arch
longformer_base`` trains: same classes, same attention), runs one forward + backward over
``--batch`` sequences of ``--tokens`` tokens, and reports the peak resident memory (RSS) of a
fresh process per setting, so the two numbers do not share an allocator history.

    python -m longformer_experiments.checkpointing                           # longformer_base, 4,096 tokens
    python -m longformer_experiments.checkpointing --arch longformer_large
    python -m longformer_experiments.checkpointing --layers 4 --tokens 1024  # quicker, smaller

On CPU this measures host memory; activations dominate the difference, and the difference is
what activation checkpointing saves on a GPU as well (there measured with
torch.cuda.max_memory_allocated, which this prints when it runs on CUDA).

``--checkpoint-activations`` goes through fairseq's own parser, as in fairseq-train: fairseq's
RoBERTa ``add_args`` does not declare it, the longformer model's ``add_args`` does (see
recipes/README.md).
"""
