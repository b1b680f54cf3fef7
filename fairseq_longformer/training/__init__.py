"""Training features fairseq lacks, each replacing one fairseq behaviour (installed into fairseq
by ``runtime.apply``, which lists them with every other change the plugin makes):

    short_batches   the last batch that ``data_utils.batch_by_size`` drops when it is not a
                    multiple of ``--required-batch-size-multiple`` comes back, short
    lr_groups       parameters tagged with an ``lr_scale`` (fairseq's ``optim_overrides``) form
                    their own torch parameter group, at the scheduler's rate times the scale;
                    biases and LayerNorm parameters form groups without weight decay
    free_core_threads  under LONGFORMER_THREADS=auto, torch's thread count follows the cores
                    other processes leave free (set at the start, re-checked every 20 updates)
"""
