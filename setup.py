"""fairseq-longformer: a fairseq plugin that turns RoBERTa into Longformer.

Each source folder installs under its own import name (``PACKAGE_FOLDERS``): generic top-level
names such as ``kernels`` already belong to other distributions on PyPI. Packages are found in
those folders, not listed by hand, so a new subpackage cannot be left out of the wheel; a folder
named there that does not exist yet (another branch adds it) is skipped.

The installed code reads no data files of its own (no yaml, no tables): the Triton compile table
``tests/kernels/triton_compile_results.json`` and ``recipes/hydra/`` are for tests and recipes
in the repository, so the wheel holds Python modules only.

Install order matters (fairseq-fixed must be built against the torch you run): see the README
or ``scripts/install.sh``.
"""
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))

# repository folder -> import name
PACKAGE_FOLDERS = {
    "common": "longformer_common",
    "fairseq_longformer": "fairseq_longformer",
    "kernels": "longformer_kernels",
    "preprocessing": "longformer_preprocessing",
    "tools": "longformer_tools",
    "experiments": "longformer_experiments",
}


def discover_packages():
    """(packages, package_dir) for every folder of PACKAGE_FOLDERS that exists and is a package."""
    packages, package_dir = [], {}
    for folder, name in PACKAGE_FOLDERS.items():
        if not os.path.isfile(os.path.join(HERE, folder, "__init__.py")):
            continue
        packages.append(name)
        package_dir[name] = folder
        for sub in find_packages(where=os.path.join(HERE, folder)):
            packages.append(f"{name}.{sub}")
            package_dir[f"{name}.{sub}"] = os.path.join(folder, *sub.split("."))
    return packages, package_dir


PACKAGES, PACKAGE_DIR = discover_packages()

setup(
    name="fairseq-longformer",
    version="0.1.0",
    description="Longformer (Beltagy et al., 2020) as a fairseq plugin: attention, pretraining, export",
    # fairseq-fixed 0.12.3.1 builds on 3.10-3.12 (a cp312 wheel exists); 3.13 is untested
    python_requires=">=3.10,<3.13",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    install_requires=[
        # torch <= 2.5.1 runs code from a pickle even under weights_only=True (CVE-2025-32434)
        "torch>=2.6",
        "fairseq-fixed==0.12.3.1",
        "numpy>=1.26",
        "sentencepiece>=0.1.99",
        # sentencepiece's own sentencepiece_model_pb2 reads a .model file's pieces and settings
        # (conversion/tokenizer.py); it imports protobuf, which sentencepiece does not require
        "protobuf",
        "triton>=3.0; platform_system == 'Linux'",
        "tqdm",
        # fairseq's text-to-speech task logs "Please install tensorboardX" at every fairseq-train
        # start without it; with it, fairseq's --tensorboard-logdir works too
        "tensorboardX",
    ],
    extras_require={
        "hf": ["transformers>=4.40", "safetensors"],
        # longformer-export-onnx and its check (onnxscript only for its --dynamo exporter)
        "onnx": ["transformers>=4.40", "safetensors", "onnx>=1.16", "onnxruntime>=1.18"],
        # the PyTorch path's attention-dropout mask in one native pass on CPU (kernels/fused_keep.py);
        # without it the same mask runs as eager tensor passes, about 1.2x slower for the attention core
        "cpu": ["numba>=0.59"],
        "bench": ["matplotlib"],  # longformer-bench's plot (Figure 1)
        "demo": ["rouge-score"],  # recipes/led_demo.sh's ROUGE (Google's rouge_score)
        "dev": ["pytest>=7", "pytest-xdist>=3", "transformers>=4.40", "safetensors", "matplotlib", "rouge-score",
                "numba>=0.59", "onnx>=1.16", "onnxruntime>=1.18"],
    },
    entry_points={
        "console_scripts": [
            "longformer-train = fairseq_longformer.cli.train:main",
            "longformer-user-dir = fairseq_longformer.cli.train:print_user_dir",
            "longformer-bench = longformer_tools.cli.bench:main",
            "longformer-bench-led = longformer_tools.cli.bench_led:main",
            "longformer-bench-lm = longformer_tools.cli.bench_lm:main",
            "longformer-bench-mlm = longformer_tools.cli.bench_mlm:main",
            "longformer-bench-hf = longformer_tools.cli.bench_hf:main",
            "longformer-preprocess = longformer_preprocessing.cli:main",
            "longformer-preprocess-chars = longformer_preprocessing.chars:main",
            "longformer-prepare-task = longformer_preprocessing.task_data:main",
            "longformer-convert-roberta = fairseq_longformer.cli.convert_roberta:main",
            "longformer-convert-bart = fairseq_longformer.cli.convert_bart:main",
            "longformer-export-hf = fairseq_longformer.cli.export_hf:main",
            "longformer-import-hf = fairseq_longformer.cli.import_hf:main",
            "longformer-export-onnx = fairseq_longformer.cli.export_onnx:main",
            "longformer-report = longformer_tools.cli.report:main",
            "longformer-gpu-check = longformer_tools.gpu.gpu_check:main",
            "longformer-coref-score = longformer_preprocessing.tasks.coref_score:main",
            "longformer-select-paragraphs = fairseq_longformer.cli.select_paragraphs:main",
        ]
    },
)
