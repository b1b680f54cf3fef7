from longformer_experiments.led_demo.main import main

main()
