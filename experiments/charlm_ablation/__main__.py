import sys

from longformer_experiments.charlm_ablation.main import main

sys.exit(main())
