"""The tokenizer an LED export writes when the dictionary has no <mask> (a translation task's, as
an LED or BART fine-tuned on document -> summary pairs has): transformers loads it, it declares
no mask token, gives no id past the model's embeddings, and maps text to the fairseq ids.
"""
import argparse
import types

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_longformer.conversion.hf_export import export_led_model
from fairseq_longformer.models.led import LEDModel, led_base_architecture

from tests.plugin.conversion.test_hf import (  # noqa: F401  (gpt2_files, sentencepiece_file: fixtures)
    SENTENCES, _fairseq_ids, gpt2_files, sentencepiece_file, tokenizer_setup,
)

transformers = pytest.importorskip("transformers")


def tiny_led(dictionary):
    args = argparse.Namespace(encoder_layers=1, decoder_layers=1, encoder_embed_dim=16, decoder_embed_dim=16,
                              encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32, encoder_attention_heads=2,
                              decoder_attention_heads=2, max_source_positions=64, max_target_positions=32,
                              attention_window="4", task="translation")
    led_base_architecture(args)
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None)
    return LEDModel.build_model(args, task).eval()


@pytest.mark.parametrize("kind", ["gpt2", "sentencepiece"])
def test_led_tokenizer_without_mask(tmp_path, kind, gpt2_files, sentencepiece_file):  # noqa: F811
    bpe, _, files = tokenizer_setup(kind, gpt2_files, sentencepiece_file, tmp_path)
    # dict.txt loaded as the translation task loads it: no <mask> appended
    d = Dictionary.load(str(tmp_path / "dict.txt"))
    assert "<mask>" not in d.indices

    out = tmp_path / "hf"
    export_led_model(tiny_led(d), d, out, tokenizer=files)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert tokenizer.mask_token is None
    assert len(tokenizer) == len(d)  # no special token added past the embeddings
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == \
        (d.bos(), d.pad(), d.eos(), d.unk())
    for text in SENTENCES:
        assert tokenizer(text)["input_ids"] == _fairseq_ids(bpe, d, text), text

    model = transformers.LEDForConditionalGeneration.from_pretrained(out).eval()
    batch = tokenizer(SENTENCES[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        out_ids = model.generate(**batch, max_new_tokens=3, num_beams=1, do_sample=False)
    assert out_ids.shape[0] == 3 and int(out_ids.max()) < len(d)
