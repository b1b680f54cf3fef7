"""Task ``longformer_mlm``: blocks keep documents and never exceed --tokens-per-sample, batches are
padded to a multiple of the window only, and misfit settings stop before training."""
import argparse

import numpy as np
import pytest
import torch
from fairseq import tasks
from fairseq.data import ListDataset

import fairseq_longformer  # noqa: F401
from fairseq_longformer.tasks.longformer_mlm import SplitLongLinesDataset
from tests.conftest import TINY_MODEL_ARGS  # noqa: F401  (documents the flags used below)


def setup_task(data, **overrides):
    cfg = dict(data=str(data), tokens_per_sample=128, pad_to_multiple=16, seed=1)
    cfg.update(overrides)
    parser_args = argparse.Namespace(task="longformer_mlm", **cfg)
    return tasks.setup_task(parser_args)


def test_split_long_lines_cuts_into_pieces_in_order():
    items = [torch.arange(10), torch.arange(3), torch.arange(7)]
    sizes = np.array([len(t) for t in items])
    split = SplitLongLinesDataset(ListDataset(items, sizes), sizes, max_len=4)
    assert list(split.sizes) == [4, 4, 2, 3, 4, 3]
    pieces = [split[i] for i in range(len(split))]
    torch.testing.assert_close(torch.cat(pieces[:3]), items[0])
    torch.testing.assert_close(torch.cat(pieces[4:]), items[2])


@pytest.mark.parametrize("break_mode", ["complete_doc", "complete", "eos", "none"])
def test_blocks_fit_and_batches_pad_to_window_multiple(kjv_data_bin, break_mode):
    """KJV chapters are single lines far longer than 127 tokens: without the split, fairseq's
    complete/complete_doc modes would emit blocks longer than the block size (fairseq #5167).
    The eos mode only works with the numpy-2 patch in compat (np.compat.long)."""
    task = setup_task(kjv_data_bin, sample_break_mode=break_mode)
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    assert len(dataset) > 0
    sizes = dataset.sizes if not isinstance(dataset.sizes, list) else dataset.sizes[0]
    if break_mode != "eos":  # eos mode keeps fairseq's own behaviour for long lines
        assert sizes.max() <= 128
    batch = dataset.collater([dataset[i] for i in range(min(5, len(dataset)))])
    src, target = batch["net_input"]["src_tokens"], batch["target"]
    assert src.shape == target.shape
    assert src.shape[1] % 16 == 0 and src.shape[1] - 16 < max(batch["net_input"]["src_lengths"])
    assert (target.ne(task.source_dictionary.pad()).sum() > 0)


def test_complete_doc_blocks_do_not_cross_documents(kjv_data_bin):
    """A document ends with an empty line, i.e. two eos in a row: no block holds one inside."""
    task = setup_task(kjv_data_bin, tokens_per_sample=512, sample_break_mode="complete_doc")
    blocks = task._load_dataset_split("valid", epoch=1, combine=False)  # unmasked, <s> prepended
    eos = task.source_dictionary.eos()
    assert len(blocks) > 4
    for i in range(len(blocks)):
        block = blocks[i]
        assert block[0] == task.source_dictionary.bos() and len(block) <= 512
        inner = block[1:-2]
        assert not ((inner[:-1] == eos) & (inner[1:] == eos)).any(), f"block {i} crosses a document"


def test_tokens_per_sample_beyond_positions_stops_before_training(kjv_data_bin):
    from fairseq.models import ARCH_CONFIG_REGISTRY
    task = setup_task(kjv_data_bin, tokens_per_sample=256)
    args = argparse.Namespace(arch="longformer_base", max_positions=128, encoder_layers=1,
                              encoder_embed_dim=16, encoder_ffn_embed_dim=16, encoder_attention_heads=2,
                              _name="longformer_base")
    ARCH_CONFIG_REGISTRY["longformer_base"](args)
    with pytest.raises(ValueError, match="--tokens-per-sample 256 is larger than the model's 128 positions"):
        task.build_model(args)


def test_include_target_tokens_and_index_reach_the_model(kjv_data_bin):
    """fairseq's masked_lm options keep their meaning in the overridden dataset: the targets
    padded like the input as ``target_tokens``, the sample ids as ``src_id`` (on by default),
    and the model takes the batch as fairseq's criterion hands it over."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    task = setup_task(kjv_data_bin, include_target_tokens=True)
    assert task.cfg.include_index  # fairseq's default
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    indices = list(range(min(3, len(dataset))))
    batch = dataset.collater([dataset[i] for i in indices])
    net_input = batch["net_input"]
    assert torch.equal(net_input["target_tokens"], batch["target"])
    assert torch.equal(net_input["src_id"], batch["id"])
    assert net_input["target_tokens"].shape == net_input["src_tokens"].shape
    args = argparse.Namespace(arch="longformer_base", max_positions=128, encoder_layers=1, encoder_embed_dim=16,
                              encoder_ffn_embed_dim=16, encoder_attention_heads=2, attention_window="16")
    model = ARCH_MODEL_REGISTRY["longformer_base"].build_model(args, task)
    logits = model(**net_input)[0]
    assert logits.shape[:2] == net_input["src_tokens"].shape

    plain = setup_task(kjv_data_bin, include_index=False)
    plain.load_dataset("valid")
    dataset = plain.dataset("valid")
    net_input = dataset.collater([dataset[i] for i in indices])["net_input"]
    assert set(net_input) == {"src_tokens", "src_lengths"}


def test_pad_multiple_that_pads_past_the_positions_stops_before_training(kjv_data_bin):
    from fairseq.models import ARCH_CONFIG_REGISTRY

    task = setup_task(kjv_data_bin, tokens_per_sample=120, pad_to_multiple=64)  # 120 -> 128 > 120
    args = argparse.Namespace(arch="longformer_base", max_positions=120, encoder_layers=1,
                              encoder_embed_dim=16, encoder_ffn_embed_dim=16, encoder_attention_heads=2,
                              attention_window="8", _name="longformer_base")
    ARCH_CONFIG_REGISTRY["longformer_base"](args)
    with pytest.raises(ValueError, match="--pad-to-multiple 64 pads a full block of --tokens-per-sample 120 to 128"):
        task.build_model(args)


def test_batch_pad_multiple_divides_the_block_and_every_window():
    from fairseq_longformer.tasks.longformer_mlm import batch_pad_multiple

    assert batch_pad_multiple([256] * 12, 4096) == 256  # the paper's setting
    assert batch_pad_multiple([32, 32, 64], 1024) == 32
    assert batch_pad_multiple([256], 1000) == 8  # a window that does not divide the block
    assert batch_pad_multiple([0, 16], 128) == 16  # w = 0 imposes nothing


def masked_fraction(task, split):
    dataset = task.dataset(split)
    pad = task.source_dictionary.pad()
    masked = tokens = 0
    for i in range(len(dataset)):
        target = dataset[i]["target"]  # one block, unpadded: pad marks the positions not masked
        masked += int(target.ne(pad).sum())
        tokens += len(target)
    return masked / tokens


def test_train_mask_prob_masks_only_the_training_split(kjv_data_bin):
    """--train-mask-prob 0.4 masks 40% of the training tokens; valid keeps --mask-prob's 15%, so
    valid BPC is the same metric whatever the training rate."""
    task = setup_task(kjv_data_bin, train_mask_prob=0.4)
    task.load_dataset("train")
    task.load_dataset("valid")
    assert masked_fraction(task, "train") == pytest.approx(0.4, abs=0.02)
    assert masked_fraction(task, "valid") == pytest.approx(0.15, abs=0.02)
    assert task.cfg.mask_prob == 0.15
    with pytest.raises(ValueError, match="--train-mask-prob must be in"):
        setup_task(kjv_data_bin, train_mask_prob=1.5).load_dataset("train")
