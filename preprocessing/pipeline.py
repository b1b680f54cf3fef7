"""The preprocessing run: read -> select -> tokenize -> split -> fairseq binaries.

Passes over the input (each streaming, the corpus is never held in memory):
0. only with --train-sentencepiece: a seeded sample of text chunks (the k smallest hashes) is
   collected and a sentencepiece model trained on it;
1. documents are read, selected, tokenized (``--workers`` processes, order preserved, a bounded
   number of chunks in flight) and appended to a scratch store;
2. the store is copied into train/valid/test with fairseq's mmap builder.
Everything is written in ``<destdir>/.tmp-longformer-preprocess-<pid>/`` and moved to its final
name at the end, the completion manifest last (``destination``).
"""
from __future__ import annotations

import collections
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import document as D
from .binarize import DocStore, SplitWriter
from .destination import (
    MANIFEST, TMP_PREFIX, DestLock, claim_destination, finished_run, publish_outputs, run_signature,
)
from .document import ReaderConfig
from .options import SOURCES, parse_args
from .sampling import SplitPlanner, below_fraction, content_digest, sample_by_hash, unit_hash
from .segment import document_lines
from .stats import BadInputReport, corpus_stats, dump_json, render_markdown
from .tokenizer import EOS, TokenizerSpec, train_sentencepiece, write_dict
from .inputs import READERS, collect_inputs
from .workers import chunk_text, encode_chunk, init_worker

SPM_NAME = "spm.model"
SPM_CHUNK_CHARS = 2000
CHUNK_CHARS = 1 << 18  # text per task sent to a worker
CHUNK_DOCS = 256
INFLIGHT_PER_WORKER = 3

def log(msg: str) -> None:
    from tqdm import tqdm

    tqdm.write(f"longformer-preprocess: {msg}", file=sys.stderr)


def _progress(args, **kw):
    from tqdm import tqdm

    return tqdm(file=sys.stderr, disable=args.no_progress, mininterval=1.0, dynamic_ncols=True, **kw)


# ---------------------------------------------------------------- the run


class Preprocessor:
    def __init__(self, args):
        self.args = args
        self.destdir = args.destdir
        self.cfg = ReaderConfig(max_doc_chars=args.max_doc_chars, jsonl_text_field=args.jsonl_text_field)
        self.report = BadInputReport()
        self.selection = collections.OrderedDict(
            realnews_not_sampled=0,
            realnews_below_min_tokens=0,
            stories_not_sampled=0,
        )
        self.source_stats: Dict[str, Dict[str, int]] = collections.OrderedDict()
        self.unk_tokens = 0
        self.docs_read = 0

    # ------------------------------------------------------------ reading and selection

    def _bad(self, kind: str, where: str, detail: str = "") -> None:
        if self.report.add(kind, where, detail) and self.log_bad:
            log(f"bad input ({kind.replace('_', ' ')}): {where}" + (f": {detail}" if detail else ""))
        elif self.report.counts[kind] == BadInputReport.MAX_EXAMPLES + 1 and self.log_bad:
            log(f"more {kind.replace('_', ' ')}s: counted, not listed (see the summary)")

    def candidates(self, inputs, count: bool) -> Iterator[Tuple[int, str, str, bytes]]:
        """(source index, document name, text, content digest) of documents that pass the
        checks and the hash-only selection (the Realnews length test needs the tokens and is
        done later). ``count``: record bad input and selection counts (pass 1 only)."""
        a = self.args
        self.log_bad = count
        for source, path, name in inputs:
            s_idx = SOURCES.index(source)
            if name.endswith("(folder without files)"):
                if count:
                    self._bad(D.EMPTY_FILE, name)
                continue
            for doc in READERS[source](path, f"{source}:{name}", self.cfg):
                if doc.problem is not None:
                    if count:
                        self._bad(doc.problem, doc.name, doc.detail)
                    continue
                if count:
                    self.docs_read += 1
                if doc.bad_utf8:
                    if count:
                        self._bad(D.INVALID_UTF8, doc.name, "replaced by U+FFFD" if a.invalid_utf8 == "replace" else "skipped")
                    if a.invalid_utf8 == "skip":
                        continue
                digest = content_digest(doc.text)
                if source == "realnews" and not below_fraction(unit_hash(a.seed, "realnews", digest), a.realnews_fraction):
                    if count:
                        self.selection["realnews_not_sampled"] += 1
                    continue
                if source == "stories" and not below_fraction(unit_hash(a.seed, "stories", digest), a.stories_fraction):
                    if count:
                        self.selection["stories_not_sampled"] += 1
                    continue
                yield s_idx, doc.name, doc.text, digest

    # ------------------------------------------------------------ tokenizer

    def prepare_tokenizer(self, tmp: str, inputs) -> TokenizerSpec:
        a = self.args
        if a.gpt2_encoder_json is not None:
            return TokenizerSpec("gpt2", encoder_json=a.gpt2_encoder_json, vocab_bpe=a.gpt2_vocab_bpe, srcdict=a.srcdict)
        if a.sentencepiece_model is not None:
            shutil.copyfile(a.sentencepiece_model, os.path.join(tmp, SPM_NAME))
            return TokenizerSpec("sentencepiece", spm_model=os.path.join(tmp, SPM_NAME), srcdict=a.srcdict)
        # --train-sentencepiece: a seeded uniform sample of text chunks, bounded in characters.
        bar = _progress(a, desc="sampling for sentencepiece", unit="doc")

        def chunks():
            for _, _, text, _ in self.candidates(inputs, count=False):
                bar.update(1)
                for line in document_lines(text):
                    yield from chunk_text(line, SPM_CHUNK_CHARS)

        sample = sample_by_hash(chunks(), a.spm_sample_chars, a.seed, "spm")
        bar.close()
        if not sample:
            return None  # nothing usable: the caller reports it after pass 1 counted why
        t0 = time.time()
        log(f"training sentencepiece ({a.spm_model_type}, vocabulary {a.train_sentencepiece}) on {len(sample):,} sampled chunks")
        try:
            model = train_sentencepiece(
                sample,
                os.path.join(tmp, SPM_NAME),
                a.train_sentencepiece,
                a.seed,
                model_type=a.spm_model_type,
                character_coverage=a.spm_character_coverage,
            )
        except RuntimeError as e:  # e.g. a vocabulary smaller than the characters + 256 bytes
            raise SystemExit(f"longformer-preprocess: --train-sentencepiece {a.train_sentencepiece}: sentencepiece failed: {e}")
        del sample
        log(f"sentencepiece trained in {time.time() - t0:.1f}s")
        return TokenizerSpec("sentencepiece", spm_model=model)

    # ------------------------------------------------------------ pass 1

    def _chunks(self, docs) -> Iterator[Tuple[list, List[str]]]:
        meta, texts, chars = [], [], 0
        for s_idx, name, text, digest in docs:
            meta.append((s_idx, name, digest))
            texts.append(text)
            chars += len(text)
            if chars >= CHUNK_CHARS or len(texts) >= CHUNK_DOCS:
                yield meta, texts
                meta, texts, chars = [], [], 0
        if texts:
            yield meta, texts

    def _encoded(self, chunks, spec: TokenizerSpec):
        """Yield (meta, result) per document in input order; add up the tokenizer's CPU time."""
        a = self.args
        self.tokenizer_cpu_seconds = 0.0
        if a.workers == 1:
            init_worker(spec, a.max_line_tokens)
            for meta, texts in chunks:
                results, cpu = encode_chunk(texts)
                self.tokenizer_cpu_seconds += cpu
                yield from zip(meta, results)
            return
        pool = multiprocessing.Pool(a.workers, initializer=init_worker, initargs=(spec, a.max_line_tokens, True))
        try:
            pending = collections.deque()
            limit = INFLIGHT_PER_WORKER * a.workers
            for meta, texts in chunks:
                pending.append((meta, pool.apply_async(encode_chunk, (texts,))))
                del texts
                while len(pending) >= limit:
                    yield from self._collect(pending.popleft())
            while pending:
                yield from self._collect(pending.popleft())
            pool.close()
            pool.join()
        finally:
            pool.terminate()

    def _collect(self, item):
        meta, async_result = item
        results, cpu = async_result.get()
        self.tokenizer_cpu_seconds += cpu
        return zip(meta, results)

    def tokenize_all(self, inputs, spec: TokenizerSpec, store: DocStore, planner: SplitPlanner) -> float:
        a = self.args
        bar = _progress(a, desc="tokenizing", unit="doc")
        t0 = time.time()
        tokens_total = 0
        for (s_idx, name, digest), (flat, sizes, n_tokens, n_unk, n_split) in self._encoded(
            self._chunks(self.candidates(inputs, count=True)), spec
        ):
            bar.update(1)
            source = SOURCES[s_idx]
            tokens_total += n_tokens
            if len(sizes) == 0:
                self._bad(D.EMPTY_DOCUMENT, name, "no tokens")
                continue
            if source == "realnews" and n_tokens <= a.realnews_min_tokens:
                self.selection["realnews_below_min_tokens"] += 1
                continue
            # The document separator: an empty line, i.e. an item holding only </s>.
            flat = np.concatenate([flat, np.array([EOS], dtype=np.int32)])
            sizes = np.concatenate([sizes, np.array([1], dtype=np.int32)])
            u = unit_hash(a.seed, "split", digest)
            store.add(u, s_idx, flat, sizes, n_tokens)
            planner.observe(u)
            st = self.source_stats.setdefault(source, {"documents": 0, "tokens": 0, "lines": 0, "split_lines": 0, "unk_tokens": 0})
            st["documents"] += 1
            st["tokens"] += n_tokens
            st["lines"] += len(sizes) - 1
            st["split_lines"] += n_split
            st["unk_tokens"] += n_unk
            if bar.n % 64 == 0:
                bar.set_postfix(tokens=f"{tokens_total:,}", refresh=False)
        bar.close()
        elapsed = time.time() - t0
        self.tokens_tokenized = tokens_total
        return elapsed

    # ------------------------------------------------------------ pass 2

    def write_splits(self, tmp: str, store: DocStore, planner: SplitPlanner, dictionary_size: int):
        a = self.args
        planner.finish()
        writer = SplitWriter(tmp, dictionary_size)
        counts = np.zeros(dictionary_size, dtype=np.int64)
        buffered: List[np.ndarray] = []
        buffered_len = 0
        bar = _progress(a, desc="writing splits", unit="doc", total=store.num_docs)
        for d, rec, tokens, sizes in store.iter_documents():
            split = planner.assign(int(rec["u"]))
            writer.add_document(split, tokens, sizes, int(rec["tokens"]))
            if split == "train":  # dict.txt counts, as fairseq-preprocess takes them from train
                buffered.append(np.asarray(tokens))
                buffered_len += len(tokens)
                if buffered_len >= 1 << 20:
                    counts += np.bincount(np.concatenate(buffered), minlength=dictionary_size)[:dictionary_size]
                    buffered, buffered_len = [], 0
            bar.update(1)
        if buffered:
            counts += np.bincount(np.concatenate(buffered), minlength=dictionary_size)[:dictionary_size]
        bar.close()
        writer.finalize()
        return writer, counts

    # ------------------------------------------------------------ the whole run

    def run(self) -> dict:
        a = self.args
        created = not os.path.exists(self.destdir)
        os.makedirs(self.destdir, exist_ok=True)
        with DestLock(self.destdir) as lock:
            inputs = collect_inputs(self.args, log)
            try:
                given = [path for source in SOURCES for path in getattr(a, source)]  # folders as given too
                claim_destination(self.destdir, a.overwrite, given + [path for _, path, _ in inputs])
            except SystemExit:  # refused before anything was written: leave no trace
                lock.remove_if_created()
                if created:
                    os.rmdir(self.destdir)
                raise
            signature = run_signature(self.args, inputs)
            if not a.force and finished_run(self.destdir, signature) is not None:
                log(f"{self.destdir} already holds a finished run with the same arguments and inputs "
                    f"({MANIFEST}); skipping (use --force to redo)")
                with open(os.path.join(self.destdir, "stats.json"), encoding="utf-8") as f:
                    return json.load(f)
            # From here on the destdir is not "done" until the new manifest is written.
            manifest_path = os.path.join(self.destdir, MANIFEST)
            if os.path.exists(manifest_path):
                os.remove(manifest_path)
            for name in os.listdir(self.destdir):
                if name.startswith(TMP_PREFIX):  # left by a killed run (we hold the lock)
                    log(f"removing {name} left by an interrupted run")
                    shutil.rmtree(os.path.join(self.destdir, name), ignore_errors=True)
            tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=self.destdir)
            try:
                return self._run_in(tmp, inputs, signature)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def _fail_no_documents(self, n_files: int) -> None:
        bad = "; ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in self.report.counts.items() if v)
        if self.docs_read == 0:
            raise SystemExit(
                f"longformer-preprocess: every input was bad: no usable document in {n_files} input file(s)"
                + (f" ({bad})" if bad else "")
            )
        sel = "; ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in self.selection.items() if v)
        raise SystemExit(
            f"longformer-preprocess: no document selected from {self.docs_read:,} read"
            + (f" (selection: {sel})" if sel else "")
            + (f" (bad input: {bad})" if bad else "")
        )

    def _run_in(self, tmp: str, inputs, signature) -> dict:
        a = self.args
        self.log_bad = False
        spec = self.prepare_tokenizer(tmp, inputs)
        if spec is None:  # --train-sentencepiece found no text at all: count why, then fail
            for _ in self.candidates(inputs, count=True):
                pass
            self._fail_no_documents(len(inputs))
        tokenizer = spec.build()
        dictionary_size = tokenizer.dictionary_size

        store = DocStore(tmp)
        planner = SplitPlanner(a.valid_docs, a.test_docs)
        elapsed = self.tokenize_all(inputs, spec, store, planner)
        store.close()
        if store.num_docs == 0:
            self._fail_no_documents(len(inputs))

        writer, counts = self.write_splits(tmp, store, planner, dictionary_size)
        for path in (store.tokens_path, store.sizes_path, store.meta_path):
            os.remove(path)
        if writer.docs["train"] == 0:
            raise SystemExit(
                f"longformer-preprocess: no document left for train ({store.num_docs} selected; "
                f"valid {a.valid_docs.describe()}, test {a.test_docs.describe()})"
            )
        for split in ("valid", "test"):
            if writer.docs[split] == 0 and (getattr(a, split + "_docs").count if getattr(a, split + "_docs").is_count else 1):
                log(f"WARNING: the {split} split is empty ({getattr(a, split + '_docs').describe()} of {store.num_docs} documents)")
        if a.valid_docs.is_count and writer.docs["valid"] < a.valid_docs.count:
            log(f"WARNING: valid has {writer.docs['valid']} documents, fewer than the {a.valid_docs.count} asked")
        if a.test_docs.is_count and writer.docs["test"] < a.test_docs.count:
            log(f"WARNING: test has {writer.docs['test']} documents, fewer than the {a.test_docs.count} asked")

        outputs = [f"{s}.{ext}" for s in SplitWriter.SPLITS for ext in ("bin", "idx")]
        dict_path = os.path.join(tmp, "dict.txt")
        if a.srcdict is not None:
            shutil.copyfile(a.srcdict, dict_path)
        else:
            write_dict(dict_path, tokenizer.symbols, counts)
        outputs.append("dict.txt")
        if spec.kind == "sentencepiece":
            if os.path.abspath(spec.spm_model) != os.path.abspath(os.path.join(tmp, SPM_NAME)):
                os.replace(spec.spm_model, os.path.join(tmp, SPM_NAME))
            outputs.append(SPM_NAME)

        stats = corpus_stats(self.args, self.source_stats, self.selection, self.report, spec, writer, dictionary_size)
        dump_json(stats, os.path.join(tmp, "stats.json"))
        with open(os.path.join(tmp, "stats.md"), "w", encoding="utf-8") as f:
            f.write(render_markdown(stats))
        outputs += ["stats.json", "stats.md"]

        publish_outputs(self.destdir, tmp, outputs, signature)
        self.print_summary(stats, elapsed)
        return stats

    def print_summary(self, stats: dict, elapsed: float) -> None:
        a = self.args
        tot = stats["total"]
        log(f"wrote {self.destdir}: {tot['documents']:,} documents, {tot['tokens']:,} tokens "
            f"(train {stats['splits']['train']['documents']:,} / valid {stats['splits']['valid']['documents']:,} / "
            f"test {stats['splits']['test']['documents']:,} documents)")
        rate = self.tokens_tokenized / elapsed if elapsed > 0 else 0.0
        cpu = self.tokenizer_cpu_seconds
        per_cpu = self.tokens_tokenized / cpu if cpu > 0 else 0.0
        log(f"tokenized {self.tokens_tokenized:,} tokens in {elapsed:.1f}s: {rate:,.0f} tokens/s, "
            f"{rate / a.workers:,.0f} tokens/s per worker ({a.workers} worker(s)); "
            f"tokenizer CPU time {cpu:.1f}s = {per_cpu:,.0f} tokens per CPU-second")
        sel = stats["selection"]
        if any(sel.values()):
            log("selection: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sel.items()))
        lines = self.report.summary_lines()
        if lines:
            log(f"bad input ({self.report.total:,} in all; details in stats.json):\n" + "\n".join(lines))
        else:
            log("bad input: none")


def preprocess(argv: Optional[List[str]] = None) -> dict:
    """Run ``longformer-preprocess`` with the given command-line arguments; returns the stats
    (also written to ``<destdir>/stats.json``). Raises SystemExit on bad usage or when no
    usable document is found."""
    return Preprocessor(parse_args(argv)).run()
