from longformer_experiments.checkpointing.main import main

main()
