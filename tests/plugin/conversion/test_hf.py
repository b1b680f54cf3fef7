"""fairseq Longformer <-> Hugging Face transformers: same logits both ways, exact round trip,
clear refusals, tokenizers that give the fairseq ids. Everything offline, random weights."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

import fairseq_longformer  # noqa: F401  (registers the plugin)
from fairseq_longformer.cli import export_hf as export_cli
from fairseq_longformer.cli import import_hf as import_cli
from fairseq_longformer.conversion import to_hf_masked_lm
from fairseq_longformer.conversion.hf_export import export_model
from fairseq_longformer.conversion.hf_import import DictionaryTask, import_hf
from fairseq_longformer.conversion.families.longformer import key_map, reverse_key_map
from fairseq_longformer.conversion.rules import DICT_COPY
from fairseq_longformer.conversion.tokenizer import TokenizerFiles

transformers = pytest.importorskip("transformers")

from tests.conftest import KJV, TINY_MODEL_ARGS  # noqa: E402

BIN = Path(sys.executable).parent
TOL = 1e-4  # fp32, eval mode


def word_dictionary(words=40):
    d = Dictionary()
    for i in range(words):
        d.add_symbol(f"w{i}", n=1000 - i)
    d.add_symbol("<mask>")  # as fairseq's masked_lm task does
    return d


def build_model(dictionary, positions=80, seed=0, **overrides):
    """A small random Longformer built through fairseq's registries, every weight perturbed so that
    a swapped or dropped tensor (e.g. global vs local projections, tied copies) changes the output."""
    args = argparse.Namespace(**{**dict(encoder_layers=3, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                                        encoder_attention_heads=4, attention_window="3,6,12",
                                        max_positions=positions, dropout=0.0), **overrides})
    ARCH_CONFIG_REGISTRY["longformer"](args)
    model = ARCH_MODEL_REGISTRY["longformer"].build_model(args, DictionaryTask(dictionary, positions)).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    return model


def padded_batch(dictionary, lengths, seed=1):
    """(B, max(lengths)) tokens <s> ... </s> then <pad>; lengths are not window multiples."""
    gen = torch.Generator().manual_seed(seed)
    n = max(lengths)
    src = torch.randint(dictionary.nspecial, len(dictionary) - 1, (len(lengths), n), generator=gen)
    for b, length in enumerate(lengths):
        src[b, 0], src[b, length - 1] = dictionary.bos(), dictionary.eos()
        src[b, length:] = dictionary.pad()
    return src


def global_mask(shape, rows):
    """rows: {batch row: [global positions]} (different per row, none for some)."""
    mask = torch.zeros(shape, dtype=torch.long)
    for b, positions in rows.items():
        mask[b, positions] = 1
    return mask


def fairseq_logits(model, src, glob=None):
    with torch.no_grad():
        return model(src, global_attention_mask=glob)[0]


def hf_logits(model, src, pad, glob=None):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=src.ne(pad).long(), global_attention_mask=glob).logits


def max_diff(a, b, src, pad):
    keep = src.ne(pad)  # outputs at padding positions are meaningless on both sides
    return (a - b)[keep].abs().max().item()


# ----------------------------------------------------------------------------------------------
# the key map


def test_key_map_counts_and_reverse_cover_transformers_names():
    layers = 3
    fwd = key_map(layers, "longformer", global_projections=True, tied=True)
    # 9 outside the layers (tokens, positions, 2 emb-LN, 2 head dense, 2 head LN, head bias),
    # 22 per layer (11 modules with weight + bias)
    assert len(fwd) == 9 + 22 * layers
    assert len(key_map(layers, tied=False)) == len(fwd) + 1
    assert len(key_map(layers, "roberta", global_projections=False)) == 9 + 16 * layers
    rev = reverse_key_map(layers)
    assert {fs: hf_key for hf_key, (fs, _) in rev.items()} == {fs: h for fs, (h, _) in fwd.items()}

    # the HF side of the table is transformers' own naming, nothing more and nothing less
    cfg = dict(vocab_size=30, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=34)
    extra = {"lm_head.decoder.weight", "lm_head.decoder.bias"}
    longformer = transformers.LongformerForMaskedLM(transformers.LongformerConfig(attention_window=4, **cfg))
    assert set(longformer.state_dict()) == set(rev) | extra | {"longformer.embeddings.token_type_embeddings.weight"}
    roberta = transformers.RobertaForMaskedLM(transformers.RobertaConfig(**cfg))
    assert set(roberta.state_dict()) == set(reverse_key_map(layers, "roberta", False)) | extra | {
        "roberta.embeddings.token_type_embeddings.weight"}


# ----------------------------------------------------------------------------------------------
# export: same logits, exact round trip


@pytest.mark.parametrize("untie", [False, True], ids=["tied", "untied"])
def test_export_gives_transformers_the_same_logits(tmp_path, untie):
    d = word_dictionary()
    model = build_model(d, untie_weights_roberta=untie)
    out = tmp_path / "hf"
    result = export_model(model, d, out)

    config = json.loads((out / "config.json").read_text())
    assert config["attention_window"] == [6, 12, 24]  # two-sided: 2w per layer
    assert config["max_position_embeddings"] == 82 and config["vocab_size"] == len(d) == 45
    assert config["type_vocab_size"] == 1 and config["tie_word_embeddings"] is (not untie)
    specials = ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id")
    assert [config[k] for k in specials] == [d.pad(), d.bos(), d.eos(), d.eos()] == [1, 0, 2, 2]
    assert result.config["layer_norm_eps"] == 1e-5

    model_hf, info = transformers.LongformerForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert torch.count_nonzero(model_hf.longformer.embeddings.token_type_embeddings.weight) == 0
    model_hf.eval()
    auto = transformers.AutoModelForMaskedLM.from_pretrained(out)
    assert isinstance(auto, transformers.LongformerForMaskedLM)

    src = padded_batch(d, [37, 23, 30])  # 37: not a multiple of any window
    glob = global_mask(src.shape, {0: [0, 5], 2: [0, 1, 2, 29]})  # row 1: no global token
    ours = fairseq_logits(model, src, glob)
    theirs = hf_logits(model_hf, src, d.pad(), glob)
    diff = max_diff(ours, theirs, src, d.pad())
    print(f"export max |logit diff| ({'untied' if untie else 'tied'}): {diff:.3g}")
    assert diff < TOL
    # the comparison can fail: without the global tokens on the HF side the outputs differ
    assert max_diff(ours, hf_logits(model_hf, src, d.pad()), src, d.pad()) > 100 * TOL


@pytest.mark.parametrize("untie", [False, True], ids=["tied", "untied"])
def test_in_memory_export_gives_the_same_logits(untie):
    """``to_hf_masked_lm``: the export without a folder, same weights (the LM head tied or not)."""
    d = word_dictionary()
    model = build_model(d, untie_weights_roberta=untie, dropout=0.1, attention_dropout=0.2)
    model_hf = to_hf_masked_lm(model, d)
    assert model_hf.training and model_hf.config.attention_window == [6, 12, 24]
    assert (model_hf.config.hidden_dropout_prob, model_hf.config.attention_probs_dropout_prob) == (0.1, 0.2)
    model_hf.eval()
    src = padded_batch(d, [80, 57])
    assert max_diff(fairseq_logits(model, src), hf_logits(model_hf, src, d.pad()), src, d.pad()) < TOL


def test_round_trip_fairseq_hf_fairseq_is_exact(tmp_path):
    from fairseq import checkpoint_utils

    d = word_dictionary()
    model = build_model(d, attention_window="2,4,8", seed=3)
    export_model(model, d, tmp_path / "hf")
    result = import_hf(tmp_path / "hf", tmp_path / "back")
    assert result.dictionary_source == DICT_COPY and result.attention_window == (2, 4, 8)

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(result.checkpoint)])
    back = models[0].eval()
    ours, theirs = model.state_dict(), back.state_dict()
    assert set(ours) == set(theirs)
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key
    assert task.source_dictionary.symbols == d.symbols
    assert cfg.model.attention_window == "2,4,8" and cfg.model.max_positions == 80
    src = padded_batch(d, [30, 19])
    glob = global_mask(src.shape, {1: [0, 3]})
    assert torch.equal(fairseq_logits(model, src, glob), fairseq_logits(back, src, glob))


# ----------------------------------------------------------------------------------------------
# import: HF Longformer and RoBERTa folders made offline


def _perturbed(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.eval()


def test_import_hf_longformer_matches_transformers(tmp_path):
    config = transformers.LongformerConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=66, type_vocab_size=1, layer_norm_eps=1e-5, attention_window=[4, 8],
        pad_token_id=1, bos_token_id=0, eos_token_id=2, sep_token_id=2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    source = _perturbed(transformers.LongformerForMaskedLM(config), seed=4)
    source.save_pretrained(tmp_path / "hf")
    result = import_hf(tmp_path / "hf", tmp_path / "fs")
    assert result.attention_window == (2, 4) and result.max_positions == 64
    assert result.dictionary_source == "placeholders"
    symbols = [line.split()[0] for line in (tmp_path / "fs" / "dict.txt").read_text().splitlines()]
    assert symbols == [f"hf:{i}" for i in range(4, 49)]

    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(result.checkpoint)])
    assert len(task.source_dictionary) == 50 and task.source_dictionary.index("<mask>") == 49
    src = padded_batch(task.source_dictionary, [41, 26, 13])
    glob = global_mask(src.shape, {0: [0], 1: [0, 7, 20]})
    diff = max_diff(fairseq_logits(models[0].eval(), src, glob), hf_logits(source, src, 1, glob), src, 1)
    print(f"HF Longformer import max |logit diff|: {diff:.3g}")
    assert diff < TOL


def test_import_hf_roberta_matches_transformers(tmp_path):
    config = transformers.RobertaConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=66, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    source = _perturbed(transformers.RobertaForMaskedLM(config), seed=5)
    token_type = source.roberta.embeddings.token_type_embeddings.weight[0].detach().clone()
    assert token_type.abs().sum() > 0  # so the folding into the positions is exercised
    source.save_pretrained(tmp_path / "hf")
    result = import_hf(tmp_path / "hf", tmp_path / "fs", max_positions=150, attention_window="64")
    assert result.max_positions == 150 and result.attention_window == (64, 64)

    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(result.checkpoint)])
    model = models[0].eval()
    positions = model.encoder.sentence_encoder.embed_positions.weight.detach()
    learned = source.roberta.embeddings.position_embeddings.weight.detach()[2:] + token_type
    assert positions.shape == (152, 32)
    assert torch.allclose(positions[2:66], learned) and torch.allclose(positions[66:130], learned)
    assert torch.allclose(positions[130:152], learned[:22])  # tiled, the paper's copy init
    attn = model.encoder.sentence_encoder.layers[1].self_attn
    assert torch.equal(attn.k_global_proj.weight, attn.k_proj.weight)

    src = padded_batch(task.source_dictionary, [40, 17, 33])  # the window (64) covers the input
    diff = max_diff(fairseq_logits(model, src), hf_logits(source, src, 1), src, 1)
    print(f"HF RoBERTa import max |logit diff|: {diff:.3g}")
    assert diff < TOL


def test_import_refuses_what_fairseq_cannot_load(tmp_path):
    folder = tmp_path / "bert_like"
    folder.mkdir()
    config = transformers.RobertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                        intermediate_size=64, layer_norm_eps=1e-12, hidden_act="relu")
    config.save_pretrained(folder)
    with pytest.raises(ValueError) as error:
        import_hf(folder, tmp_path / "out")
    assert "layer_norm_eps" in str(error.value) and "hidden_act" in str(error.value)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------
# what HF cannot represent: refused, nothing written


@pytest.mark.parametrize("overrides, names", [
    (dict(attention_dilation="2"), ["--attention-dilation", "dilation 2"]),
    (dict(attention_dilation="1,1,1:2:1:2"), ["--attention-dilation", "different dilation per head"]),
    (dict(attention_causal=True), ["--attention-causal"]),
    (dict(attention_window="0"), ["--attention-window", "w = 0"]),
    (dict(attention_window="3,5,2"), ["--attention-window 3,5,2", "divide"]),
    (dict(encoder_normalize_before=True), ["--encoder-normalize-before"]),
    (dict(activation_fn="relu"), ["--activation-fn"]),
], ids=["dilation", "dilation-per-head", "causal", "window-0", "windows-not-dividing", "pre-ln", "relu"])
def test_export_refuses_unrepresentable_models(tmp_path, overrides, names):
    d = word_dictionary()
    model = build_model(d, **overrides)
    out = tmp_path / "out" / "hf"
    with pytest.raises(ValueError) as error:
        export_model(model, d, out)
    message = str(error.value)
    assert "nothing was written" in message
    for name in names:
        assert name in message
    assert not out.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # no temp folder left


def test_export_never_replaces_a_folder_silently(tmp_path):
    d = word_dictionary()
    model = build_model(d, encoder_layers=1, attention_window="4")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_model(model, d, out)
    with pytest.raises(FileExistsError, match="not written by fairseq-longformer"):
        export_model(model, d, out, overwrite=True)  # --overwrite replaces only a folder the tools wrote
    assert (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    export_model(model, d, out)
    export_model(model, d, out, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [".written-by-fairseq-longformer", "config.json",
                                                     "fairseq_dict.txt", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_export_failing_midway_leaves_nothing(tmp_path, monkeypatch):
    import safetensors.torch

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    d = word_dictionary()
    with pytest.raises(OSError, match="No space"):
        export_model(build_model(d, encoder_layers=1, attention_window="4"), d, tmp_path / "hf")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary twin


# ----------------------------------------------------------------------------------------------
# tokenizers: AutoTokenizer gives the ids the fairseq model saw

SENTENCES = [
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light. ",
    "  Zebulun's 12 tribes -- naïve café, ÇA ﬁne 😀\tend",
    "",
]


def _kjv_lines(books=2):
    lines = []
    for path in sorted(KJV.glob("*.txt"))[:books]:
        lines += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory):
    """A tiny byte-level BPE in GPT-2's file format (encoder.json + vocab.bpe)."""
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gpt2")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_kjv_lines(), vocab_size=400, min_frequency=2, show_progress=False)
    bpe.save_model(str(folder))
    os.rename(folder / "vocab.json", folder / "encoder.json")
    os.rename(folder / "merges.txt", folder / "vocab.bpe")
    return folder / "encoder.json", folder / "vocab.bpe"


@pytest.fixture(scope="module")
def sentencepiece_file(tmp_path_factory):
    import sentencepiece as spm

    folder = tmp_path_factory.mktemp("spm")
    (folder / "train.txt").write_text("\n".join(_kjv_lines()) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(folder / "train.txt"), model_prefix=str(folder / "sp"),
                                   vocab_size=600, model_type="unigram", byte_fallback=True,
                                   num_threads=1, minloglevel=2)
    return folder / "sp.model"


def _task_dictionary(symbols_with_counts, folder):
    """dict.txt as fairseq-preprocess writes it, loaded as the masked_lm task does."""
    d = Dictionary()
    for symbol, count in symbols_with_counts:
        d.add_symbol(symbol, n=count)
    d.finalize(padding_factor=8)  # sorts by count, pads with madeupwordNNNN
    d.save(str(folder / "dict.txt"))
    task_dict = Dictionary.load(str(folder / "dict.txt"))
    task_dict.add_symbol("<mask>")
    return task_dict


def _gpt2_setup(gpt2_files, folder, drop=()):
    from fairseq.data.encoders.gpt2_bpe import GPT2BPE, GPT2BPEConfig

    encoder_json, vocab_bpe = gpt2_files
    bpe = GPT2BPE(GPT2BPEConfig(gpt2_encoder_json=str(encoder_json), gpt2_vocab_bpe=str(vocab_bpe)))
    counts = {i: 0 for i in json.loads(encoder_json.read_text()).values()}
    for line in _kjv_lines(1):
        for token in bpe.encode(line).split():
            counts[int(token)] += 1
    # fairseq's dict.txt: GPT-2 ids as decimal strings, ordered by frequency (re-indexed)
    d = _task_dictionary([(str(i), c + 1) for i, c in counts.items() if str(i) not in drop], folder)
    return bpe, d


def _sentencepiece_setup(sentencepiece_file, folder):
    """(fairseq's sentencepiece encoder, task dictionary of every normal piece, shuffled)."""
    import random

    from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE, SentencepieceConfig

    bpe = SentencepieceBPE(SentencepieceConfig(sentencepiece_model=str(sentencepiece_file)))
    sp = bpe.sp
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_unknown(i) or sp.is_control(i))]
    random.Random(0).shuffle(pieces)  # a dictionary order unrelated to sentencepiece's ids
    return bpe, _task_dictionary([(p, 1) for p in pieces], folder)


def tokenizer_setup(kind, gpt2_files, sentencepiece_file, folder):
    """(fairseq encoder, masked-LM task dictionary, TokenizerFiles) of a "gpt2" or "sentencepiece"
    tokenizer; folder/dict.txt is the dictionary as saved, before the task appends <mask>."""
    if kind == "gpt2":
        bpe, d = _gpt2_setup(gpt2_files, folder)
        return bpe, d, TokenizerFiles(gpt2_encoder_json=str(gpt2_files[0]), gpt2_vocab_bpe=str(gpt2_files[1]))
    bpe, d = _sentencepiece_setup(sentencepiece_file, folder)
    return bpe, d, TokenizerFiles(sentencepiece_model=str(sentencepiece_file))


def _fairseq_ids(bpe, dictionary, text):
    """What fairseq's RoBERTa hub interface does: "<s> " + BPE + " </s>", then the dictionary."""
    line = "<s> " + bpe.encode(text) + " </s>"
    return dictionary.encode_line(line, append_eos=False, add_if_not_exist=False).long().tolist()


@pytest.mark.parametrize("kind", ["gpt2", "sentencepiece"])
def test_exported_tokenizer_gives_the_fairseq_ids(tmp_path, kind, gpt2_files, sentencepiece_file):
    bpe, d, files = tokenizer_setup(kind, gpt2_files, sentencepiece_file, tmp_path)
    assert d.index("<mask>") == len(d) - 1

    model = build_model(d, encoder_layers=1, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                        encoder_attention_heads=2, attention_window="4")
    out = tmp_path / "hf"
    export_model(model, d, out, tokenizer=files)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    if kind == "gpt2":
        assert type(tokenizer).__name__ == "RobertaTokenizer"
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id,
            tokenizer.mask_token_id) == (d.bos(), d.pad(), d.eos(), d.unk(), d.index("<mask>"))
    nontrivial = 0
    for text in SENTENCES:
        expected = _fairseq_ids(bpe, d, text)
        assert tokenizer(text)["input_ids"] == expected, text
        nontrivial += len(expected) > 2
    assert nontrivial == 3
    assert tokenizer.decode(tokenizer(SENTENCES[0])["input_ids"], skip_special_tokens=True) == SENTENCES[0]

    # and the model behind it: the same text gives the same logits on both sides
    model_hf = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
    batch = tokenizer(SENTENCES[:3], padding=True, return_tensors="pt")
    src = batch["input_ids"]
    theirs = hf_logits(model_hf, src, d.pad())
    assert max_diff(fairseq_logits(model, src), theirs, src, d.pad()) < TOL


def test_gpt2_tokens_missing_from_the_dictionary_are_reported(tmp_path, gpt2_files, caplog):
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    encoder = get_encoder(str(gpt2_files[0]), str(gpt2_files[1]))
    only_first = set(encoder.encode(SENTENCES[0])) - set(encoder.encode(SENTENCES[1]))
    components = {part for pair in encoder.bpe_ranks for part in pair}
    leaves = [i for i in sorted(only_first) if encoder.decoder[i] not in components]  # built by no merge
    dropped = {str(i) for i in sorted(leaves, key=lambda i: -len(encoder.decoder[i]))[:2]}
    assert len(dropped) == 2 and all(len(encoder.decoder[int(i)]) > 1 for i in dropped)
    bpe, d = _gpt2_setup(gpt2_files, tmp_path, drop=dropped)
    model = build_model(d, encoder_layers=1, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                        encoder_attention_heads=2, attention_window="4")
    files = TokenizerFiles(gpt2_encoder_json=str(gpt2_files[0]), gpt2_vocab_bpe=str(gpt2_files[1]))
    export_model(model, d, tmp_path / "hf", tokenizer=files)
    assert "2 of" in caplog.text and "not in the dictionary" in caplog.text
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = SENTENCES[1]  # has neither token: identical ids
    assert tokenizer(text)["input_ids"] == _fairseq_ids(bpe, d, text)
    # the documented difference: fairseq says <unk>, the HF vocabulary splits into known pieces
    assert d.unk() in _fairseq_ids(bpe, d, SENTENCES[0])
    assert d.unk() not in tokenizer(SENTENCES[0])["input_ids"]


# ----------------------------------------------------------------------------------------------
# the command lines, on a checkpoint fairseq-train wrote


def _run(cmd, **kwargs):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_command_lines_on_a_fairseq_train_checkpoint(kjv_data_bin, tmp_path):
    from fairseq import checkpoint_utils

    train = [BIN / "fairseq-train", kjv_data_bin, *TINY_MODEL_ARGS, "--batch-size", "2", "--optimizer", "adam",
             "--lr", "1e-3", "--cpu", "--no-epoch-checkpoints", "--disable-validation", "--log-format", "simple"]
    _run(train + ["--max-update", "1", "--save-dir", tmp_path / "train"])
    checkpoint = tmp_path / "train" / "checkpoint_last.pt"

    # export: dict.txt is found through the checkpoint's --data folder
    _run([BIN / "longformer-export-hf", checkpoint, tmp_path / "hf"])
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"data": str(kjv_data_bin)})
    d = task.source_dictionary
    model_hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    assert model_hf.config.attention_window == [32, 32]  # --attention-window 16, one-sided
    assert model_hf.config.max_position_embeddings == 130  # --max-positions 128 + 2
    src = padded_batch(d, [100, 57])
    glob = global_mask(src.shape, {0: [0, 50], 1: [0]})
    diff = max_diff(fairseq_logits(models[0].eval(), src, glob), hf_logits(model_hf, src, d.pad(), glob), src, d.pad())
    print(f"fairseq-train checkpoint export max |logit diff|: {diff:.3g}")
    assert diff < TOL

    # import, then fairseq-train --restore-file continues from it (no --reset-* flags needed)
    assert import_cli.main([str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    restored = _run(train + ["--max-update", "2", "--save-dir", tmp_path / "train2",
                             "--restore-file", tmp_path / "back" / "model.pt"])
    assert "Loaded checkpoint" in restored.stdout + restored.stderr

    # a model HF cannot represent: the CLI says which setting and why, and writes nothing
    state = torch.load(checkpoint, weights_only=False)
    state["cfg"]["model"].attention_dilation = "2"
    torch.save(state, tmp_path / "dilated.pt")
    assert export_cli.main([str(tmp_path / "dilated.pt"), str(tmp_path / "refused"), "--dict",
                            str(kjv_data_bin / "dict.txt")]) == 2
    assert not (tmp_path / "refused").exists()


def test_export_reads_the_checkpoint_once(tmp_path, monkeypatch):
    """longformer-export-hf reads (and CRC-checks) its checkpoint once: the family is told from the
    state it then builds the model from, not from a read of its own."""
    from fairseq_longformer.runtime import checkpoints
    from fairseq_longformer.conversion.hf_export import export_checkpoint

    d = word_dictionary()
    export_model(build_model(d), d, tmp_path / "hf")
    import_hf(tmp_path / "hf", tmp_path / "fs")
    reads, check_intact = [], checkpoints.check_intact
    monkeypatch.setattr(checkpoints, "check_intact", lambda source: (reads.append(str(source)), check_intact(source))[1])
    export_checkpoint(tmp_path / "fs", tmp_path / "again")
    assert reads == [str(tmp_path / "fs" / "model.pt")]
    assert (tmp_path / "again" / "model.safetensors").is_file()
