"""fairseq-longformer: a fairseq plugin that turns RoBERTa into Longformer.

The repository folders ``kernels/`` and ``preprocessing/`` install under distinct import names
(``longformer_kernels``, ``longformer_preprocessing``): generic top-level names such as
``kernels`` already belong to other distributions on PyPI.

Install order matters (fairseq-fixed must be built against the torch you run): see the README
or ``scripts/install.sh``.
"""
from setuptools import setup

setup(
    name="fairseq-longformer",
    version="0.1.0",
    description="Longformer (Beltagy et al., 2020) as a fairseq plugin: attention, pretraining, export",
    python_requires=">=3.10",
    packages=[
        "fairseq_longformer",
        "fairseq_longformer.modules",
        "fairseq_longformer.models",
        "fairseq_longformer.tasks",
        "fairseq_longformer.criterions",
        "fairseq_longformer.conversion",
        "fairseq_longformer.conversion.families",
        "fairseq_longformer.cli",
        "longformer_kernels",
        "longformer_preprocessing",
        "longformer_experiments",
        "longformer_tools",
        "longformer_tools.bench",
        "longformer_tools.cli",
        "longformer_tools.report",
        "longformer_preprocessing.tasks",
    ],
    package_dir={
        "longformer_kernels": "kernels",
        "longformer_preprocessing": "preprocessing",
        "longformer_experiments": "experiments",
        "longformer_tools": "tools",
    },
    install_requires=[
        "torch>=2.1",
        "fairseq-fixed==0.12.3.1",
        "numpy>=1.26",
        "sentencepiece>=0.1.99",
        "triton>=3.0; platform_system == 'Linux'",
        "tqdm",
        # fairseq's text-to-speech task logs "Please install tensorboardX" at every fairseq-train
        # start without it; with it, fairseq's --tensorboard-logdir works too
        "tensorboardX",
    ],
    extras_require={
        "hf": ["transformers>=4.40", "safetensors"],
        "bench": ["matplotlib"],  # longformer-bench's plot (Figure 1)
        "demo": ["rouge-score"],  # recipes/led_demo.sh's ROUGE (Google's rouge_score)
        "dev": ["pytest>=7", "transformers>=4.40", "safetensors", "matplotlib", "rouge-score"],
    },
    entry_points={
        "console_scripts": [
            "longformer-train = fairseq_longformer.cli.train:main",
            "longformer-bench = longformer_tools.cli.bench:main",
            "longformer-bench-led = longformer_tools.cli.bench_led:main",
            "longformer-bench-lm = longformer_tools.cli.bench_lm:main",
            "longformer-preprocess = longformer_preprocessing.cli:main",
            "longformer-preprocess-chars = longformer_preprocessing.chars:main",
            "longformer-prepare-task = longformer_preprocessing.task_data:main",
            "longformer-convert-roberta = fairseq_longformer.cli.convert_roberta:main",
            "longformer-convert-bart = fairseq_longformer.cli.convert_bart:main",
            "longformer-export-hf = fairseq_longformer.cli.export_hf:main",
            "longformer-import-hf = fairseq_longformer.cli.import_hf:main",
            "longformer-report = longformer_tools.cli.report:main",
        ]
    },
)
