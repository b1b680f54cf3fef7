import sys

from longformer_experiments.coref_small.main import main

sys.exit(main())
