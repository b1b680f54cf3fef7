import sys

from longformer_experiments.wikihop_small.main import main

sys.exit(main())
