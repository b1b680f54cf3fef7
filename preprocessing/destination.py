"""The destination folder of a preprocessing run, and what makes a run restartable.

Work goes to ``<destdir>/.tmp-longformer-preprocess-<pid>/`` and is moved into place at the end
(``publish_outputs``: every file flushed, then renamed, the completion manifest last), so a killed
run leaves whole files or none; the manifest records the run's signature (inputs, tokenizer files,
options) and output sizes, and the same command on a finished destination is skipped
(``finished_run``). ``DestLock`` keeps two runs out of one folder. ``claim_destination`` (under
the lock) refuses a non-empty folder this tool did not write (no ``OWNER_MARKER``) unless
--overwrite, and a destination that is, holds or is inside an input; it then marks the folder.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from typing import List, Optional

from longformer_common.atomic import publish

from .options import SOURCES

FORMAT_VERSION = 1
MANIFEST = "preprocess.done.json"
TMP_PREFIX = ".tmp-longformer-preprocess-"
LOCK_NAME = ".longformer-preprocess.lock"
# Written first into every destination a run claims: its presence means "this tool wrote here".
OWNER_MARKER = ".written-by-fairseq-longformer"


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class DestLock:
    """Exclusive lock on destdir: two runs must not write into the same folder."""

    def __init__(self, destdir: str):
        self.path = os.path.join(destdir, LOCK_NAME)
        self.fd = None

    def __enter__(self):
        self.created = not os.path.exists(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise SystemExit(f"longformer-preprocess: another run is writing to {os.path.dirname(self.path)} (lock {self.path})")
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)

    def remove_if_created(self) -> None:
        """A refused run leaves no lock file it made (call while holding the lock)."""
        if self.created:
            os.unlink(self.path)


def claim_destination(destdir: str, overwrite: bool, inputs: List[str]) -> None:
    """Refuse (SystemExit, one line) a destination that is, holds or is inside an input, or a
    non-empty folder without OWNER_MARKER unless ``overwrite``; then write the marker. Call it
    holding DestLock (the lock file itself and our temporaries do not count as content)."""
    dest = os.path.realpath(destdir)
    for path in inputs:
        source = os.path.realpath(path)
        if os.path.commonpath([dest, source]) in (dest, source):
            raise SystemExit(f"longformer-preprocess: error: --destdir {destdir} is, holds or is inside the input "
                             f"{path}; choose an output folder apart from the inputs")
    marker = os.path.join(destdir, OWNER_MARKER)
    foreign = [name for name in os.listdir(destdir) if name != LOCK_NAME and not name.startswith(TMP_PREFIX)]
    if foreign and not os.path.isfile(marker) and not overwrite:
        raise SystemExit(f"longformer-preprocess: error: --destdir {destdir} is not empty and was not written by "
                         f"longformer-preprocess (it holds {', '.join(sorted(foreign)[:3])}{', ...' if len(foreign) > 3 else ''}); "
                         "choose an empty folder, or pass --overwrite to write the outputs into it")
    if not os.path.isfile(marker):  # a skipped re-run writes nothing
        with open(marker, "w", encoding="utf-8") as f:
            f.write("written by longformer-preprocess\n")


def output_options(a) -> dict:
    """The options that decide which documents land in which split and how (also in stats.json)."""
    return {
        "seed": a.seed,
        "realnews_min_tokens": a.realnews_min_tokens,
        "realnews_fraction": str(a.realnews_fraction),
        "stories_fraction": str(a.stories_fraction),
        "valid_docs": a.valid_docs.describe(),
        "test_docs": a.test_docs.describe(),
        "max_line_tokens": a.max_line_tokens,
        "max_doc_chars": a.max_doc_chars,
        "invalid_utf8": a.invalid_utf8,
    }


def run_signature(a, inputs) -> dict:
    """What a finished run is recognised by: format, inputs (paths, sizes, mtimes), tokenizer files
    (their hashes) and every option that changes the output."""
    h = hashlib.sha256()
    for source, path, _ in inputs:
        try:
            st = os.stat(path)
            h.update(f"{source}\t{os.path.abspath(path)}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{source}\t{os.path.abspath(path)}\tmissing\n".encode())
    tokenizer_files = {}
    for flag in ("gpt2_encoder_json", "gpt2_vocab_bpe", "sentencepiece_model", "srcdict"):
        path = getattr(a, flag)
        if path is not None:
            tokenizer_files[flag] = file_sha256(path)
    return {
        "format_version": FORMAT_VERSION,
        "inputs": {s: [os.path.abspath(p) for p in getattr(a, s)] for s in SOURCES if getattr(a, s)},
        "inputs_sha256": h.hexdigest(),
        "tokenizer_files_sha256": tokenizer_files,
        "options": {
            "train_sentencepiece": a.train_sentencepiece,
            "spm_model_type": a.spm_model_type,
            "spm_sample_chars": a.spm_sample_chars,
            "spm_character_coverage": a.spm_character_coverage,
            "jsonl_text_field": a.jsonl_text_field,
            **output_options(a),
        },
    }


def finished_run(destdir: str, signature: dict) -> Optional[dict]:
    """The manifest of a finished run with this signature whose outputs are all there, or None."""
    path = os.path.join(destdir, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if manifest.get("signature") != signature:
        return None
    for name, size in manifest.get("outputs", {}).items():
        p = os.path.join(destdir, name)
        if not os.path.isfile(p) or os.path.getsize(p) != size:
            return None
    return manifest


def publish_outputs(destdir: str, tmp: str, outputs: List[str], signature: dict) -> None:
    """Move the outputs into place (``atomic.publish``: flushed, then renamed), then the
    manifest that marks the run finished, last."""
    sizes = {name: os.path.getsize(os.path.join(tmp, name)) for name in outputs}
    publish((os.path.join(tmp, name), os.path.join(destdir, name)) for name in outputs)
    manifest = {"signature": signature, "outputs": sizes}
    tmp_manifest = os.path.join(tmp, MANIFEST)
    with open(tmp_manifest, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    publish([(tmp_manifest, os.path.join(destdir, MANIFEST))])
