"""Fixtures of the tools' tests."""
import pytest
import torch


@pytest.fixture
def tiny_binaries():
    """make(data_dir, train, valid) -> Dictionary: writes dict.txt (the symbols a b c d) and the
    fairseq binaries train.{bin,idx} and valid.{bin,idx}, one item per line (a list of symbols)
    ending in </s>."""
    from fairseq.data import Dictionary, indexed_dataset

    def make(data_dir, train, valid):
        dictionary = Dictionary()
        for word in "a b c d".split():
            dictionary.add_symbol(word)
        dictionary.save(str(data_dir / "dict.txt"))
        for split, lines in (("train", train), ("valid", valid)):
            builder = indexed_dataset.make_builder(str(data_dir / f"{split}.bin"), impl="mmap",
                                                   vocab_size=len(dictionary))
            for line in lines:
                builder.add_item(torch.IntTensor([dictionary.index(w) for w in line] + [dictionary.eos()]))
            builder.finalize(str(data_dir / f"{split}.idx"))
        return dictionary

    return make
