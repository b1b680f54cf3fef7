"""Long versions of the encoders people have: RoBERTa-family Hugging Face folders (XLM-R with a
sentencepiece vocabulary, CamemBERT, a RobertaForMaskedLM under another model_type) through
``longformer-import-hf``, continued pretraining with ``fairseq-train`` and ``longformer-export-hf``
back to a LongformerForMaskedLM that AutoModel loads and that, at 512 tokens with w >= 512, gives
the source model's outputs. Random tiny models and a sentencepiece model trained here, offline."""
import io
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

from fairseq_longformer.cli import export_hf as export_cli  # noqa: E402
from fairseq_longformer.cli import import_hf as import_cli  # noqa: E402
from fairseq_longformer.conversion.hf_import import import_hf  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.plugin.conversion.test_hf import _perturbed  # noqa: E402

BIN = Path(sys.executable).parent
TOL = 1e-4  # fp32
WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "theta", "kappa", "lambda", "omega", "日本", "语言",
         "слово", "текст", "mot", "wort", "parola", "λέξη"]


def _lines(count, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) for _ in range(count)]


def _sizes(**extra):
    return dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                bos_token_id=0, eos_token_id=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **extra)


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A 48-piece unigram sentencepiece model trained on multilingual toy text."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_lines(300, 0)), model_writer=buf, vocab_size=48,
                                   model_type="unigram", character_coverage=1.0, num_threads=1,
                                   minloglevel=2)
    path = tmp_path_factory.mktemp("spm") / "sentencepiece.bpe.model"
    path.write_bytes(buf.getvalue())
    return path


def _folder(path, spm_model, tokenizer_cls, model_cls, config_cls, seed):
    """A HF folder as the Hub has them: model, tokenizer files and the sentencepiece model."""
    path.mkdir()
    shutil.copyfile(spm_model, path / "sentencepiece.bpe.model")
    tokenizer = tokenizer_cls.from_pretrained(path)
    tokenizer.save_pretrained(path)
    torch.manual_seed(seed)
    model = _perturbed(model_cls(config_cls(vocab_size=len(tokenizer), **_sizes())), seed)
    model.save_pretrained(path)
    return model, tokenizer


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory, spm_model):
    root = tmp_path_factory.mktemp("xlmr")
    model, tokenizer = _folder(root / "hf", spm_model, transformers.XLMRobertaTokenizer,
                               transformers.XLMRobertaForMaskedLM, transformers.XLMRobertaConfig, seed=1)
    return root, model, tokenizer


def _ids(tokenizer, length, rows=2, seed=3):
    """(rows, length) ids from real text, every row cut to ``length`` (<s> ... </s>)."""
    text = " ".join(_lines(40, seed))
    ids = tokenizer(text, truncation=True, max_length=length)["input_ids"]
    assert len(ids) == length
    return torch.tensor([ids] * rows)


def _logits(model, ids, **kwargs):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs).logits


def _binarize(lines, tokenizer, spm_model, dict_txt, out: Path):
    """A fairseq dataset of ``lines`` the way a user makes it: the project's sentencepiece
    preprocessing with the imported dict.txt as --srcdict; its ids checked against the HF tokenizer."""
    from fairseq.data import indexed_dataset
    from longformer_preprocessing.tokenizer import SentencePieceTokenizer

    encoded = SentencePieceTokenizer(str(spm_model), srcdict=str(dict_txt)).encode_lines(lines)
    for line, ids in zip(lines[:5], encoded):  # fairseq id == HF id, piece by piece
        assert list(ids) == tokenizer(line, add_special_tokens=False)["input_ids"]
    out.mkdir()
    shutil.copyfile(dict_txt, out / "dict.txt")
    for split, part in (("train", encoded[:-8]), ("valid", encoded[-8:])):
        builder = indexed_dataset.make_builder(str(out / f"{split}.bin"), impl="mmap", vocab_size=100)
        for ids in part:
            builder.add_item(torch.from_numpy(np.append(ids, 2).astype(np.int64)))  # </s> ends a line
        builder.finalize(str(out / f"{split}.idx"))
    return out


def test_xlm_roberta_import_train_export_round_trip(xlmr, spm_model):
    root, source, tokenizer = xlmr
    # import: positions extended by copying (512 -> 1024), global projections copied, one-sided w = 512
    assert import_cli.main([str(root / "hf"), str(root / "fs"), "--max-positions", "1024",
                            "--attention-window", "512"]) == 0
    dict_symbols = [line.split()[0] for line in (root / "fs" / "dict.txt").read_text(encoding="utf-8").splitlines()]
    assert dict_symbols == tokenizer.convert_ids_to_tokens(list(range(4, len(tokenizer) - 1)))  # pieces, HF order
    assert (root / "fs" / "hf_tokenizer" / "sentencepiece.bpe.model").is_file()

    # export of the imported checkpoint: a LongformerForMaskedLM, the source's outputs at 512 tokens
    assert export_cli.main([str(root / "fs" / "model.pt"), str(root / "exported"), "--hf-tokenizer",
                            str(root / "fs" / "hf_tokenizer")]) == 0
    exported = transformers.AutoModelForMaskedLM.from_pretrained(root / "exported").eval()
    assert type(exported).__name__ == "LongformerForMaskedLM"
    assert exported.config.attention_window == [1024, 1024] and exported.config.max_position_embeddings == 1026
    base = transformers.AutoModel.from_pretrained(root / "exported")
    assert type(base).__name__ == "LongformerModel"
    ids = _ids(tokenizer, 512)
    diff = (_logits(exported, ids) - _logits(source, ids)).abs().max().item()
    print(f"XLM-R -> Longformer at 512 tokens: max |logit diff| {diff:.3g}")
    assert diff < TOL
    carried = transformers.AutoTokenizer.from_pretrained(root / "exported")
    text = "alpha слово 日本 omega"
    assert carried(text)["input_ids"] == tokenizer(text)["input_ids"] and carried.model_max_length == 1024

    # 20 updates of continued pretraining, then the trained checkpoint exports and loads
    data = _binarize(_lines(120, 7), tokenizer, spm_model, root / "fs" / "dict.txt", root / "data")
    # The printed command's flags, with a 32-token window for 64-token blocks (a window is not a
    # weight: the checkpoint loads under any; w = 512 over 64 tokens would only cost test time).
    result_flags = ["--arch", "longformer", "--task", "longformer_mlm", "--criterion", "longformer_mlm",
                    "--encoder-layers", "2", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
                    "--encoder-attention-heads", "4", "--attention-window", "32", "--max-positions", "1024",
                    "--restore-file", str(root / "fs" / "model.pt")]
    done = subprocess.run(
        [str(BIN / "fairseq-train"), str(data), "--user-dir", str(REPO / "fairseq_longformer"), *result_flags,
         "--tokens-per-sample", "64", "--pad-to-multiple", "32", "--batch-size", "2", "--optimizer", "adam",
         "--lr", "1e-3", "--max-update", "20", "--cpu", "--save-dir", str(root / "train"), "--no-epoch-checkpoints",
         "--disable-validation", "--log-format", "simple", "--log-interval", "5", "--dropout", "0",
         "--attention-dropout", "0"],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "num_updates 20" in done.stdout + done.stderr
    assert export_cli.main([str(root / "train" / "checkpoint_last.pt"), str(root / "trained"), "--dict",
                            str(root / "fs" / "dict.txt"), "--hf-tokenizer", str(root / "fs" / "hf_tokenizer")]) == 0
    trained = transformers.AutoModelForMaskedLM.from_pretrained(root / "trained").eval()
    moved = (_logits(trained, ids) - _logits(source, ids)).abs().max().item()
    assert moved > 10 * TOL  # the export carries the trained weights, not the source's
    assert transformers.AutoTokenizer.from_pretrained(root / "trained")(text)["input_ids"] == carried(text)["input_ids"]


def test_camembert_and_roberta_shaped_folders(tmp_path, spm_model, caplog):
    # CamemBERT: <s>/</s> further on, fairseq's ids 0 and 2 kept as <s>NOTUSED/</s>NOTUSED: a warning
    source, tokenizer = _folder(tmp_path / "camembert", spm_model, transformers.CamembertTokenizer,
                                transformers.CamembertForMaskedLM, transformers.CamembertConfig, seed=2)
    assert tokenizer.convert_tokens_to_ids("<s>NOTUSED") == 0 and tokenizer.bos_token_id != 0
    result = import_hf(tmp_path / "camembert", tmp_path / "camembert_fs", max_positions=1024, attention_window="512")
    assert result.dictionary_source == "tokenizer.json"
    assert any("<s>NOTUSED" in w for w in result.warnings)
    from fairseq_longformer.conversion.hf_export import export_checkpoint

    export_checkpoint(result.checkpoint, tmp_path / "camembert_hf")
    exported = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "camembert_hf").eval()
    ids = _ids(tokenizer, 512, rows=1, seed=4)
    assert (_logits(exported, ids) - _logits(source, ids)).abs().max() < TOL

    # a RobertaForMaskedLM under a model_type of its own (a domain RoBERTa on the Hub)
    torch.manual_seed(6)
    roberta = _perturbed(transformers.RobertaForMaskedLM(transformers.RobertaConfig(vocab_size=50, **_sizes())), 6)
    roberta.save_pretrained(tmp_path / "domain")
    config = json.loads((tmp_path / "domain" / "config.json").read_text())
    (tmp_path / "domain" / "config.json").write_text(json.dumps({**config, "model_type": "domain-roberta"}))
    result = import_hf(tmp_path / "domain", tmp_path / "domain_fs", max_positions=512, attention_window="512")
    export_checkpoint(result.checkpoint, tmp_path / "domain_hf")
    exported = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "domain_hf").eval()
    ids = torch.randint(4, 49, (2, 512), generator=torch.Generator().manual_seed(5))
    assert (_logits(exported, ids) - _logits(roberta, ids)).abs().max() < TOL

    # BERT-shaped: refused in one line, nothing written
    bert = tmp_path / "bert"
    transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    ).save_pretrained(bert)
    assert import_cli.main([str(bert), str(tmp_path / "bert_fs")]) == 2
    assert not (tmp_path / "bert_fs").exists()
