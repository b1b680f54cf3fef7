"""Every fairseq behaviour the plugin changes, installed by ``apply()`` (called first by
``fairseq_longformer/__init__.py``, so ``--user-dir fairseq_longformer`` installs them all).

This is the one place fairseq is patched. Each patch is idempotent, names the failure it fixes
in its docstring, and marks what it replaces with ``_longformer_patched``. The stack: fairseq-fixed
0.12.3.1, numpy 2, torch >= 2.6, hydra 1.3, machines without CUDA or a TPU.

Each entry: the fairseq function replaced; the failure (or missing behaviour) without the patch;
-> where the replacement lives (modules of this package; ``training`` is fairseq_longformer/training).

``numpy.compat``, ``numpy.int``, ``numpy.float`` (read by fairseq.data)
    numpy 2 removed them: ``TokenBlockDataset(break_mode="eos")`` and ``compute_mask_indices``
    raise AttributeError.  -> ``shims.numpy_removed_aliases``
``torch.load`` inside ``checkpoint_utils`` and ``distributed_utils``
    torch >= 2.6 refuses fairseq's checkpoints (``Unsupported global: argparse.Namespace``), and
    ``weights_only=False`` would run a file's code; a corrupt file is a traceback.
    -> ``shims.checkpoint_loads_as_data``, ``checkpoints.fairseq_torch_load`` (allowlist:
    ``checkpoint_types``)
``options.parse_args_and_arch``
    no ``--trust-checkpoint``; the plugin's bad-input errors end in tracebacks.
    -> ``checkpoints.parse_args_and_arch_with_trust``, ``errors.install_excepthook``
``distributed_utils._infer_torch_distributed_launch_init``,
``distributed_fairseq_model.DistributedDataParallel``
    torchrun without GPUs: ``rank % device_count()`` (ZeroDivisionError), ``device_ids=[0]`` for a
    CPU module (ValueError).  -> ``shims.torchrun_on_cpu``
``distributed_utils.call_main``
    ``--bf16`` implies ``--tpu``: the Trainer asks torch_xla for a device (AttributeError).
    -> ``shims.bf16_without_a_tpu``
``BaseFairseqModel.prepare_for_inference_``
    fairseq-eval-lm / -generate ``--bf16`` evaluate in fp32.  -> ``shims.bf16_inference``
``torch.tensor`` inside ``fairseq.trainer``
    an fp16 overflow on CPU stops the run (``Torch not compiled with CUDA enabled``).
    -> ``shims.fp16_overflow_on_cpu``
``warnings`` filters
    a dozen hydra, pin_memory and autocast warnings on every run, about fairseq's own code.
    -> ``shims.quiet_unactionable_warnings``
``checkpoint_utils.PathManager.copy``
    a run killed while copying a checkpoint leaves a truncated checkpoint_last.pt.
    -> ``resume.atomic_checkpoint_copies``
``checkpoint_utils.load_checkpoint``
    a broken checkpoint_last.pt stops the resume though an intact checkpoint lies beside it.
    -> ``resume.resume_past_a_broken_last_checkpoint``
``checkpoint_utils.verify_checkpoint_directory``, ``checkpoint_utils.load_checkpoint``,
``distributed_utils.call_main``
    --save-dir is made before any input is read and never locked: a refused run leaves a folder,
    two runs into one folder overwrite each other.  -> ``save_dir.one_run_per_save_dir``
``tasks.setup_task`` (the task's ``load_dataset``, ``build_model``), ``Trainer.__init__``,
``Trainer.load_checkpoint``, ``options.parse_args_and_arch``
    a missing / empty / truncated split, ids beyond the dictionary, ``--fp16`` on CPU, dropout
    outside [0, 1), a restore of other sizes or of another dictionary, a resume whose optimizer has
    other parameter groups (another --weight-decay): tracebacks, or silently scrambled ids; adds ``--allow-dictionary-change``.
    -> ``input_checks.inputs_checked_where_fairseq_reads_them`` (``data_checks``)
``checkpoint_utils.save_checkpoint``, ``checkpoint_utils._torch_persistent_save``,
``Trainer.save_checkpoint``, ``Trainer.train_step``
    a diverging run writes crash.pt and ends in a traceback; a full disk is retried, leaves
    ``.tmp`` files and a traceback.  -> ``training_failures.training_failures_in_one_line``
``data_utils.batch_by_size`` (feature)
    drops the last batch that is not a multiple of ``--required-batch-size-multiple``.
    -> ``training.short_batches``, installed by ``training_features.keep_the_last_short_batch``
``optim.build_optimizer``, ``FairseqOptimizer.set_lr``, ``FP16Optimizer.build_optimizer`` (feature)
    every parameter trains at the one ``--lr``: no learning rate of a head's own (``lr_scale``
    tags); ``--weight-decay`` decays biases and LayerNorm parameters too (BERT's and RoBERTa's
    fine-tuning exempt them); flattened fp16 would fold the groups (kept unflattened instead).
    -> ``training.lr_groups``, installed by ``training_features.per_group_learning_rates``
``Trainer.set_num_updates`` (feature, only under ``LONGFORMER_THREADS=auto``)
    one thread count from start to end: beside another busy process each parallel region waits
    for the thread that shares a core, and the step slows several times over.
    -> ``training.free_core_threads``, installed by ``training_features.threads_following_free_cores``
``iterators.BackgroundConsumer.run``
    a run that stops inside an epoch leaves fairseq's batch-buffer thread (a daemon) alive; when
    it is inside a torch call at interpreter exit, the process aborts after the run ("terminate
    called without an active exception", exit status 134).  -> ``exit_threads.buffer_threads_stopped_before_exit``

Besides, a fairseq CLI's uncaught ``UserInputError`` prints one line (``errors``), and every
checkpoint the project itself reads goes through ``checkpoints.load_checkpoint``.
"""
from . import exit_threads, input_checks, resume, save_dir, shims, training_failures, training_features


def apply() -> None:
    """Install every patch above, in an order that matters: the later wrappers of
    ``load_checkpoint``, ``call_main`` and ``parse_args_and_arch`` wrap the earlier ones."""
    shims.numpy_removed_aliases()
    shims.checkpoint_loads_as_data()
    shims.torchrun_on_cpu()
    resume.atomic_checkpoint_copies()
    resume.resume_past_a_broken_last_checkpoint()
    training_features.keep_the_last_short_batch()
    training_features.per_group_learning_rates()
    training_features.threads_following_free_cores()
    shims.bf16_without_a_tpu()
    shims.bf16_inference()
    shims.fp16_overflow_on_cpu()
    save_dir.one_run_per_save_dir()
    input_checks.inputs_checked_where_fairseq_reads_them()
    training_failures.training_failures_in_one_line()
    shims.quiet_unactionable_warnings()
    exit_threads.buffer_threads_stopped_before_exit()
