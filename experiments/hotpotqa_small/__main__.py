import sys

from longformer_experiments.hotpotqa_small.main import main

sys.exit(main())
