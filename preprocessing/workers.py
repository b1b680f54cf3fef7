"""The tokenizer worker processes of a preprocessing run, and the text chunking they are fed with.

Each worker builds its own tokenizer once (``init_worker``) and encodes chunks of documents
(``encode_chunk``), reporting the CPU seconds it spent, so the run can print the tokenizer's own
throughput apart from the reading and writing around it.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Iterator, List

from .segment import encode_document
from .tokenizer import TokenizerSpec

_WORKER_TOKENIZER = None
_WORKER_MAX_LINE = 0


def init_worker(spec: TokenizerSpec, max_line_tokens: int, watch_parent: bool = False) -> None:
    global _WORKER_TOKENIZER, _WORKER_MAX_LINE
    _WORKER_TOKENIZER = spec.build()
    _WORKER_MAX_LINE = max_line_tokens
    if watch_parent:
        # A pool worker blocks forever on its task queue if the main process is killed
        # (SIGKILL, OOM killer): exit when the parent is gone, so a restart starts clean.
        parent = os.getppid()

        def watch():
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()


def encode_chunk(texts: List[str]):
    """Encoded documents and the CPU seconds this process spent on them."""
    t0 = time.process_time()
    results = [encode_document(_WORKER_TOKENIZER, t, _WORKER_MAX_LINE) for t in texts]
    return results, time.process_time() - t0


def chunk_text(s: str, limit: int) -> Iterator[str]:
    """Pieces of at most ``limit`` characters, cut at spaces where possible."""
    while len(s) > limit:
        cut = s.rfind(" ", 0, limit + 1)
        if cut <= limit // 2:
            cut = limit
        yield s[:cut]
        s = s[cut:].lstrip()
    if s:
        yield s
