"""Tokenizers writing fairseq Dictionary indices: RoBERTa's GPT-2 BPE or sentencepiece.

Both map their own token ids to indices of a fairseq ``Dictionary``, whose first four entries
are fairseq's specials (<s>=0, <pad>=1, </s>=2, <unk>=3), and both expose per-index flags used
to cut over-long lines at word and sentence boundaries.

- GPT-2 BPE (``encoder.json`` + ``vocab.bpe``, encoded with fairseq's own
  ``gpt2_bpe_utils.get_encoder``, the code fairseq's GPT2BPE runs): the dictionary symbols are
  the BPE ids written as decimal strings, as in fairseq's RoBERTa ``dict.txt``. Without
  ``--srcdict`` the dictionary lists every BPE id in id order (index = 4 + id); with
  ``--srcdict`` (e.g. RoBERTa's own dict.txt, needed to continue from a RoBERTa checkpoint) the
  ids are looked up in it, missing ones become <unk>.
- sentencepiece: the dictionary symbols are the pieces in piece-id order, except <unk> and
  control pieces (<s>, </s>, <pad>), which are fairseq's specials.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

import numpy as np

BOS, PAD, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
NUM_SPECIALS = 4
PAD_TO_MULTIPLE = 8  # fairseq-preprocess pads dictionaries with madeupwordNNNN to a multiple of 8
_SENTENCE_END = (".", "!", "?", '."', '?"', '!"', ".'", ".)", "?'", "!'")


@dataclass(frozen=True)
class TokenizerSpec:
    """Everything a worker process needs to build the tokenizer (picklable)."""

    kind: str  # "gpt2" or "sentencepiece"
    encoder_json: Optional[str] = None
    vocab_bpe: Optional[str] = None
    spm_model: Optional[str] = None
    srcdict: Optional[str] = None

    def build(self) -> "BaseTokenizer":
        if self.kind == "gpt2":
            return Gpt2Tokenizer(self.encoder_json, self.vocab_bpe, self.srcdict)
        if self.kind == "sentencepiece":
            return SentencePieceTokenizer(self.spm_model, self.srcdict)
        raise ValueError(self.kind)


class BaseTokenizer:
    symbols: List[str]  # dictionary symbols after the 4 specials, in index order
    id_to_index: np.ndarray  # tokenizer id -> dictionary index
    word_start: np.ndarray  # per dictionary index: the token begins a word
    sentence_end: np.ndarray  # per dictionary index: the token ends a sentence
    srcdict: Optional[str] = None

    def encode_lines(self, lines: Sequence[str]) -> List[np.ndarray]:
        raise NotImplementedError

    @property
    def dictionary_size(self) -> int:
        """len(Dictionary) once dict.txt is loaded (specials and madeupword padding included)."""
        n = NUM_SPECIALS + len(self.symbols)
        if self.srcdict is None:
            n = -(-n // PAD_TO_MULTIPLE) * PAD_TO_MULTIPLE
        return n

    def _flags_from_strings(self, strings_by_index: Sequence[Optional[str]], word_marker: str) -> None:
        n = len(strings_by_index)
        self.word_start = np.zeros(n, dtype=bool)
        self.sentence_end = np.zeros(n, dtype=bool)
        for i, s in enumerate(strings_by_index):
            if s:
                self.word_start[i] = s.startswith(word_marker)
                self.sentence_end[i] = s.endswith(_SENTENCE_END)


def load_dict_symbols(path: str) -> List[str]:
    """Symbols of a fairseq dict.txt ("symbol count" lines), in file order."""
    symbols = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            symbol = line.rsplit(" ", 1)[0] if " " in line else line
            if symbol.endswith(" #fairseq:overwrite"):
                symbol = symbol[: -len(" #fairseq:overwrite")]
            symbols.append(symbol)
    return symbols


def _index_of_symbols(symbols: List[str]) -> dict:
    index = {s: i for i, s in enumerate(SPECIALS)}
    for i, s in enumerate(symbols):
        index.setdefault(s, NUM_SPECIALS + i)
    return index


class Gpt2Tokenizer(BaseTokenizer):
    def __init__(self, encoder_json: str, vocab_bpe: str, srcdict: Optional[str] = None):
        from fairseq.data.encoders.gpt2_bpe_utils import get_encoder  # fairseq only for GPT-2 BPE

        self.bpe = get_encoder(encoder_json, vocab_bpe)
        self.srcdict = srcdict
        n_ids = max(self.bpe.encoder.values()) + 1
        if srcdict is None:
            self.symbols = [str(i) for i in range(n_ids)]
            self.id_to_index = np.arange(NUM_SPECIALS, NUM_SPECIALS + n_ids, dtype=np.int64)
        else:
            self.symbols = load_dict_symbols(srcdict)
            index = _index_of_symbols(self.symbols)
            self.id_to_index = np.array([index.get(str(i), UNK) for i in range(n_ids)], dtype=np.int64)
        # Flags per dictionary index, from the BPE token strings ("Ġ" is GPT-2's space byte).
        strings: List[Optional[str]] = [None] * (NUM_SPECIALS + len(self.symbols))
        decoder = self.bpe.decoder
        for bpe_id in range(n_ids):
            idx = int(self.id_to_index[bpe_id])
            if idx >= NUM_SPECIALS and bpe_id in decoder:
                strings[idx] = decoder[bpe_id]
        self._flags_from_strings(strings, "\u0120")

    def encode_ids(self, line: str) -> List[int]:
        """Raw GPT-2 BPE ids, exactly what fairseq's GPT2BPE.encode writes."""
        return self.bpe.encode(line)

    def encode_lines(self, lines: Sequence[str]) -> List[np.ndarray]:
        lookup = self.id_to_index
        return [lookup[np.asarray(self.bpe.encode(line), dtype=np.int64)] for line in lines]


class SentencePieceTokenizer(BaseTokenizer):
    def __init__(self, model_path: str, srcdict: Optional[str] = None):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.srcdict = srcdict
        n = self.sp.get_piece_size()
        pieces = [self.sp.id_to_piece(i) for i in range(n)]
        if srcdict is None:
            self.symbols = []
            index = {s: i for i, s in enumerate(SPECIALS)}
            id_to_index = np.full(n, UNK, dtype=np.int64)
            for i, piece in enumerate(pieces):
                if self.sp.is_unknown(i):
                    id_to_index[i] = UNK
                elif piece in index:  # <s>, </s>, <pad> (control or user-defined): fairseq's own
                    id_to_index[i] = index[piece]
                elif self.sp.is_control(i):
                    id_to_index[i] = UNK  # never produced by encode
                else:
                    index[piece] = NUM_SPECIALS + len(self.symbols)
                    id_to_index[i] = index[piece]
                    self.symbols.append(piece)
        else:
            self.symbols = load_dict_symbols(srcdict)
            index = _index_of_symbols(self.symbols)
            id_to_index = np.array([index.get(p, UNK) for p in pieces], dtype=np.int64)
        self.id_to_index = id_to_index
        strings: List[Optional[str]] = [None] * (NUM_SPECIALS + len(self.symbols))
        for i, s in enumerate(self.symbols):
            strings[NUM_SPECIALS + i] = s
        self._flags_from_strings(strings, "\u2581")

    def encode_lines(self, lines: Sequence[str]) -> List[np.ndarray]:
        lookup = self.id_to_index
        return [lookup[np.asarray(ids, dtype=np.int64)] for ids in self.sp.encode(list(lines), out_type=int)]


def write_dict(path: str, symbols: Sequence[str], counts: Optional[np.ndarray]) -> int:
    """Write ``dict.txt`` in fairseq's format ("symbol count" per line, specials omitted) padded
    with ``madeupwordNNNN 0`` to a multiple of 8 entries including the specials, as
    fairseq-preprocess does. Returns len(Dictionary) after loading."""
    n = NUM_SPECIALS + len(symbols)
    padded = -(-n // PAD_TO_MULTIPLE) * PAD_TO_MULTIPLE
    with open(path, "w", encoding="utf-8") as f:
        for i, s in enumerate(symbols):
            c = int(counts[NUM_SPECIALS + i]) if counts is not None else 0
            f.write(f"{s} {c}\n")
        for j in range(padded - n):
            f.write(f"madeupword{j:04d} 0\n")
    return padded


def train_sentencepiece(
    sentences: Iterable[str],
    model_path: str,
    vocab_size: int,
    seed: int,
    model_type: str = "unigram",
    character_coverage: float = 0.9999,
) -> str:
    """Train a sentencepiece model on ``sentences`` and write it to ``model_path``.

    Deterministic: the caller fixes the order of the sentences, sentencepiece's own sampling and
    shuffling are off, its random generator is seeded and it runs on one thread (the result must
    not depend on --workers). Sentences are passed as an iterator and the model comes back
    through ``model_writer``, so no file name (which would hold the run's temporary folder)
    ends up inside the model. ``hard_vocab_limit=False`` lets a small corpus get a smaller
    vocabulary than asked instead of failing; byte fallback keeps characters outside the
    vocabulary from becoming <unk>.
    """
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=True,
        hard_vocab_limit=False,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        max_sentence_length=16384,
        num_threads=1,
        minloglevel=2,
    )
    with open(model_path, "wb") as f:
        f.write(buffer.getvalue())
    return model_path
