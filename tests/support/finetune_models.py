"""Build the tiny model and a task through fairseq's own argument parsing, as fairseq-train does."""
import torch
from fairseq import options, tasks

import fairseq_longformer  # noqa: F401  (registers the plugin)
from tests.support.finetune_data import TINY_FINETUNE_ARGS


def task_and_model(data, task: str, *extra: str, seed: int = 1):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), *TINY_FINETUNE_ARGS, "--task", task,
                                                "--criterion", task, *extra])
    torch.manual_seed(seed)
    fairseq_task = tasks.setup_task(args)
    model = fairseq_task.build_model(args).eval()
    return fairseq_task, model, args


def batch(task, split: str, indices):
    """The collated batch of ``indices`` of ``split``, as fairseq's iterator would give it."""
    dataset = task.datasets.get(split) or task.load_dataset(split)
    return dataset.collater([dataset[i] for i in indices])
