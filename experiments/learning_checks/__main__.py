import sys

from longformer_experiments.learning_checks.main import main

sys.exit(main())
