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
