from longformer_experiments.finetune_kjv.main import main

main()
