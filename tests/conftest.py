"""Shared fixtures: a small binarized corpus made from the bundled KJV books, and the flags of a
tiny Longformer. The tiny model runs exactly the code paths of longformer_base (same classes,
same attention), only with fewer layers, narrower hidden states and shorter blocks."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KJV = REPO / "data" / "kjv"
BIN = Path(sys.executable).parent

# A 2-layer, 64-wide Longformer with a window smaller than the block.
TINY_MODEL_ARGS = [
    "--user-dir", str(REPO / "fairseq_longformer"),
    "--arch", "longformer_base", "--task", "longformer_mlm", "--criterion", "longformer_mlm",
    "--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
    "--encoder-attention-heads", "4", "--attention-window", "16", "--pad-to-multiple", "16",
    "--tokens-per-sample", "128", "--max-positions", "128",
]


def _word_level(path: Path) -> str:
    """One line per paragraph, lower-cased words and punctuation, blank line after each book."""
    lines = []
    for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
        words = re.findall(r"\w+|[^\w\s]", paragraph.lower())
        if words:
            lines.append(" ".join(words))
    return "\n".join(lines) + "\n\n"


def make_word_level_data_bin(destdir: Path, train_books=8, valid_books=2, vocab=1000) -> Path:
    """Binarize a few KJV books with a whitespace vocabulary (fast: no subword model)."""
    books = sorted(KJV.glob("*.txt"))
    text = destdir / "text"
    text.mkdir(parents=True, exist_ok=True)
    (text / "train.txt").write_text("".join(_word_level(b) for b in books[:train_books]))
    (text / "valid.txt").write_text("".join(_word_level(b) for b in books[-valid_books:]))
    subprocess.run(
        [str(BIN / "fairseq-preprocess"), "--only-source", "--trainpref", str(text / "train.txt"),
         "--validpref", str(text / "valid.txt"), "--destdir", str(destdir / "bin"),
         "--nwordssrc", str(vocab), "--workers", "1"],
        check=True, capture_output=True,
    )
    return destdir / "bin"


@pytest.fixture(scope="session")
def kjv_data_bin(tmp_path_factory) -> Path:
    """A word-level binarized corpus of 8 train and 2 valid KJV books (lines split by paragraph)."""
    return make_word_level_data_bin(tmp_path_factory.mktemp("kjv"))



def _accelerator():
    """Where the kernel and attention tests run, and in which dtypes: CUDA when present, else the
    CPU with Triton's interpreter (the root conftest.py set TRITON_INTERPRET=1). ``triton_dtypes``:
    what the Triton kernels are checked in; the interpreter's bf16 arithmetic is wrong (it
    computes on the raw bits), so there bf16 is checked on the PyTorch path only
    (``torch_dtypes``)."""
    import types

    import torch

    cuda = torch.cuda.is_available()
    sixteen = (torch.float16, torch.bfloat16) if cuda else (torch.float16,)
    return types.SimpleNamespace(
        device=torch.device("cuda" if cuda else "cpu"), interpreter=not cuda,
        triton_dtypes=(torch.float32, *sixteen),
        torch_dtypes=(torch.float32, torch.float16, torch.bfloat16))


ACCELERATOR = _accelerator()  # also read at import by tests/kernels/kernel_helpers.py (DEVICE)


@pytest.fixture(scope="session")
def accelerator():
    """The kernel and attention tests' device and dtypes (``_accelerator``)."""
    return ACCELERATOR
