import sys

from longformer_experiments.global_ablation.main import main

sys.exit(main())
