"""``longformer-prepare-task``, kept at its old import path (console script and
``python -m longformer_preprocessing.task_data``); the code lives in ``tasks/``."""
import sys

from .tasks.cli import main

if __name__ == "__main__":
    sys.exit(main())
