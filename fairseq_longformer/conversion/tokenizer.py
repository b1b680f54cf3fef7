"""The tokenizer ``longformer-export-hf`` writes (HF id == fairseq id): GPT-2 BPE, sentencepiece, or carried."""
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenizerFiles:
    """The tokenizer the fairseq data was made with: GPT-2 BPE, a sentencepiece model or a HF folder."""
    gpt2_encoder_json: Optional[str] = None
    gpt2_vocab_bpe: Optional[str] = None
    sentencepiece_model: Optional[str] = None
    hf_folder: Optional[str] = None  # a transformers tokenizer whose ids are the dictionary's

    @property
    def kind(self) -> Optional[str]:
        gpt2 = self.gpt2_encoder_json is not None or self.gpt2_vocab_bpe is not None
        if sum((gpt2, self.sentencepiece_model is not None, self.hf_folder is not None)) > 1:
            raise ValueError("give one of --gpt2-encoder-json/--gpt2-vocab-bpe, --sentencepiece-model or "
                             "--hf-tokenizer, not several")
        if self.hf_folder is not None:
            if not os.path.isdir(self.hf_folder):
                raise FileNotFoundError(f"--hf-tokenizer {self.hf_folder!r} is not a folder: pass a transformers "
                                        "tokenizer folder (longformer-import-hf wrote one as OUTDIR/hf_tokenizer)")
            return "hf"
        if gpt2 and (self.gpt2_encoder_json is None or self.gpt2_vocab_bpe is None):
            raise ValueError("--gpt2-encoder-json and --gpt2-vocab-bpe go together: give both")
        for path in (self.gpt2_encoder_json, self.gpt2_vocab_bpe, self.sentencepiece_model):
            if path is not None and not os.path.isfile(path):
                raise FileNotFoundError(f"tokenizer file {path!r} not found")
        return "gpt2" if gpt2 else "sentencepiece" if self.sentencepiece_model else None


OWN_ID_ROLES = ("bos_token", "pad_token", "eos_token", "unk_token", "mask_token")  # cls / sep: bos / eos again


def _special_tokens(dictionary) -> Dict[str, Optional[str]]:
    s = dictionary.symbols
    return {"bos_token": s[dictionary.bos()], "eos_token": s[dictionary.eos()], "unk_token": s[dictionary.unk()],
            "pad_token": s[dictionary.pad()], "cls_token": s[dictionary.bos()], "sep_token": s[dictionary.eos()],
            "mask_token": "<mask>" if "<mask>" in dictionary.indices else None}


def gpt2_tokenizer(files: TokenizerFiles, dictionary, model_max_length: int):
    """A RobertaTokenizer mapping each GPT-2 BPE token to its fairseq id (dict.txt lists GPT-2 ids as decimals)."""
    from transformers import RobertaTokenizer
    encoder: Dict[str, int] = json.loads(Path(files.gpt2_encoder_json).read_text(encoding="utf-8"))
    # exactly what fairseq's gpt2_bpe_utils.get_encoder reads: a version line, then merges
    merges = [tuple(line.split()) for line in Path(files.gpt2_vocab_bpe).read_text(encoding="utf-8").split("\n")[1:-1]]
    specials = _special_tokens(dictionary)
    vocab: Dict[str, int] = {token: dictionary.index(token) for token in map(specials.get, OWN_ID_ROLES) if token}
    absent = []
    for token, gpt2_id in sorted(encoder.items(), key=lambda kv: kv[1]):
        index = dictionary.indices.get(str(gpt2_id))
        if index is None:
            absent.append(token)
        elif token not in vocab:  # a special's text wins (HF matches specials before BPE)
            vocab[token] = index
    taken = set(vocab.values())
    for index in range(len(dictionary)):  # ids no BPE token reaches (madeupword padding, ...)
        if index not in taken:
            name = dictionary.symbols[index]
            vocab[name if name not in vocab else f"<fairseq_unused_{index}>"] = index
    assert len(set(vocab.values())) == len(vocab) == len(dictionary), "GPT-2 vocabulary is not one-to-one"
    kept = [m for m in merges if len(m) == 2 and m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    if absent:
        logger.warning(f"{len(absent)} of {len(encoder)} GPT-2 BPE tokens are not in the dictionary (fairseq maps "
                       f"them to <unk>); the exported tokenizer leaves them and the {len(merges) - len(kept)} merges "
                       "using them out, so text containing them, or tokens built through them, tokenizes into other "
                       f"pieces than in fairseq (e.g. {absent[:5]})")
    tokenizer = RobertaTokenizer(vocab=vocab, merges=kept, add_prefix_space=False,
                                 model_max_length=model_max_length, **specials)
    # written over save_pretrained's: the files transformers 4.x's slow GPT-2 tokenizer reads
    return tokenizer, {"vocab.json": json.dumps(vocab, ensure_ascii=False),
                       "merges.txt": "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in kept)}


_SP_NORMAL, _SP_USER_DEFINED, _SP_BYTE = 1, 4, 6  # sentencepiece's piece types


def sentencepiece_tokenizer(files: TokenizerFiles, dictionary, model_max_length: int):
    """A Unigram tokenizer over the sentencepiece pieces in the dictionary's order (entry k = symbol k)."""
    from google.protobuf.message import DecodeError
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    proto, model_path = sentencepiece_model_pb2.ModelProto(), files.sentencepiece_model
    try:
        proto.ParseFromString(Path(model_path).read_bytes())
    except DecodeError as error:
        raise ValueError(f"{model_path!r} is not a sentencepiece model: {error}") from error
    if not proto.pieces:
        raise ValueError(f"{model_path!r} is not a sentencepiece model: it has no pieces")
    trainer, normalizer = proto.trainer_spec, proto.normalizer_spec
    pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
    if trainer.model_type != 1:
        kind = {2: "bpe", 3: "word", 4: "char"}.get(trainer.model_type, trainer.model_type)
        raise ValueError(f"--sentencepiece-model {model_path!r} is a {kind} model: only unigram sentencepiece "
                         "models (the project's default) are exported")
    if not normalizer.escape_whitespaces or trainer.treat_whitespace_as_suffix:
        raise ValueError(f"--sentencepiece-model {model_path!r}: escape_whitespaces=false or "
                         "treat_whitespace_as_suffix=true has no equivalent in the exported tokenizer")
    specials = _special_tokens(dictionary)
    score = {p: s for p, s, t in pieces if t in (_SP_NORMAL, _SP_USER_DEFINED)}
    kinds = {p: t for p, _, t in pieces}
    lowest = min((s for p, s, t in pieces if t == _SP_NORMAL), default=0.0)
    vocab = [(symbol, score.get(symbol, lowest)) for symbol in dictionary.symbols]
    for token in filter(None, map(specials.get, OWN_ID_ROLES)):  # the specials with an id of their own
        vocab[dictionary.index(token)] = (token, 0.0)
    absent = [p for p, _, t in pieces if t in (_SP_NORMAL, _SP_USER_DEFINED, _SP_BYTE) and p not in dictionary.indices]
    if absent:
        logger.warning(f"{len(absent)} sentencepiece pieces are not in the dictionary (fairseq maps them to <unk>); "
                       f"the exported tokenizer cannot produce them and segments around them (e.g. {absent[:5]})")
    byte_fallback = trainer.byte_fallback and any(kinds.get(p) == _SP_BYTE for p in dictionary.symbols)
    tok = Tokenizer(models.Unigram(vocab, unk_id=dictionary.unk(), byte_fallback=byte_fallback))
    steps = [normalizers.Precompiled(normalizer.precompiled_charsmap)] if normalizer.precompiled_charsmap else []
    if normalizer.remove_extra_whitespaces:
        steps += [normalizers.Strip(left=True, right=True), normalizers.Replace(Regex(" {2,}"), " ")]
    if steps:
        tok.normalizer = normalizers.Sequence(steps)
    # Split before each "▁" unless some piece spans a word boundary (inner "▁").
    inner = any("\u2581" in p[1:] for p, _, t in pieces if t == _SP_NORMAL)
    prepend = "always" if normalizer.add_dummy_prefix else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=prepend, split=not inner)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(" ", 1, 0)] if normalizer.add_dummy_prefix else []))
    bos, eos = specials["bos_token"], specials["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, dictionary.bos()), (eos, dictionary.eos())])
    user_defined = [p for p, _, t in pieces if t == _SP_USER_DEFINED and p in dictionary.indices]
    if user_defined:  # sentencepiece matches them verbatim, before normalization
        tok.add_tokens([AddedToken(p, normalized=False, special=False) for p in user_defined])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **specials), {}


def carried_tokenizer(files: TokenizerFiles, dictionary, model_max_length: int):
    """The transformers tokenizer in ``files.hf_folder``, checked to give the dictionary's ids (count, specials)."""
    from transformers import AutoTokenizer
    folder = files.hf_folder
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, model_max_length=model_max_length)
    except (OSError, ValueError) as error:
        first = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"--hf-tokenizer {folder!r} does not load as a transformers tokenizer: {first}") from error
    if len(tokenizer) != len(dictionary):
        raise ValueError(f"--hf-tokenizer {folder!r} has {len(tokenizer)} ids, the model's dictionary "
                         f"{len(dictionary)}: not the tokenizer this model was made with")
    specials = _special_tokens(dictionary)
    for role in ("pad_token", "unk_token", "mask_token"):
        theirs = getattr(tokenizer, role + "_id", None)
        if specials[role] is not None and theirs != dictionary.index(specials[role]):
            raise ValueError(f"--hf-tokenizer {folder!r} puts its {role} at id {theirs}, the model's dictionary at "
                             f"{dictionary.index(specials[role])}: not the tokenizer this model was made with")
    return tokenizer, {}


def build_tokenizer(files: TokenizerFiles, dictionary, model_max_length: int):
    """(transformers tokenizer, {file name: text} to write after it) for ``files``; (None, {}) for no tokenizer."""
    kind = files.kind
    try:
        builder = {"gpt2": gpt2_tokenizer, "sentencepiece": sentencepiece_tokenizer, "hf": carried_tokenizer}.get(kind)
        return builder(files, dictionary, model_max_length) if builder else (None, {})
    except ImportError as error:
        raise ImportError(f"exporting a tokenizer needs transformers and tokenizers "
                          f"(pip install 'fairseq-longformer[hf]'): {error}") from error
