import sys

from longformer_experiments.table5_small.main import main

sys.exit(main())
