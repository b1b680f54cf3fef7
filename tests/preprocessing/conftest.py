"""Fixtures for the preprocessing tests (helpers live in preprocessing_helpers.py)."""
from __future__ import annotations

import os

import pytest

from preprocessing_helpers import make_gpt2_files


@pytest.fixture(scope="session")
def gpt2_files(tmp_path_factory):
    return make_gpt2_files(str(tmp_path_factory.mktemp("gpt2")))


@pytest.fixture(scope="session")
def gpt2_args(gpt2_files):
    return ["--gpt2-encoder-json", gpt2_files["encoder_json"], "--gpt2-vocab-bpe", gpt2_files["vocab_bpe"]]


@pytest.fixture
def run_preprocess():
    """Call the pipeline in-process with --no-progress."""
    from longformer_preprocessing import preprocess

    def run(args):
        return preprocess(list(args) + ["--no-progress"])

    return run


@pytest.fixture(scope="session")
def kjv_slice(tmp_path_factory):
    """The 16 shortest books of the bundled King James corpus (real text), some compressed."""
    from preprocessing_helpers import KJV_DIR, write_text

    names = sorted(n for n in os.listdir(KJV_DIR) if n.endswith(".txt"))
    names = sorted(names, key=lambda n: os.path.getsize(os.path.join(KJV_DIR, n)))[:16]
    folder = tmp_path_factory.mktemp("kjv")
    for i, name in enumerate(sorted(names)):
        with open(os.path.join(KJV_DIR, name), encoding="utf-8") as f:
            text = f.read()
        write_text(str(folder / (name + ("", ".gz", ".xz")[i % 3])), text)
    return str(folder)


@pytest.fixture(scope="session")
def spm_model(kjv_slice, tmp_path_factory):
    """A small sentencepiece model trained on the KJV slice (no fairseq import needed to use it)."""
    from longformer_preprocessing.workers import chunk_text
    from longformer_preprocessing.segment import document_lines
    from longformer_preprocessing.textio import iter_lines, list_input_files
    from longformer_preprocessing.tokenizer import train_sentencepiece

    sample = []
    for path, _ in list_input_files(kjv_slice):
        for line in iter_lines(path, 1 << 20):
            for text in document_lines(line.text):
                sample.extend(chunk_text(text, 2000))
    return train_sentencepiece(sample, str(tmp_path_factory.mktemp("spm") / "kjv.model"), 1000, seed=1)
