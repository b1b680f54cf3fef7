"""The coreference head's settings against mandarjoshi90/coref (``experiments.conf``, ``util.py``,
``independent.py``): one genre row per OntoNotes genre the CoNLL reader reads, the reference's
initialisation, and segment-distance buckets that follow the segment length as the reference's
configurations do."""
import types

import pytest
import torch
from fairseq.data import Dictionary
from torch import nn

from fairseq_longformer.models.coref_head import (
    CorefHead, genre_index, segment_distance_buckets,
)
from fairseq_longformer.tasks.longformer_coref import LongformerCorefConfig, LongformerCorefTask
from fairseq_longformer.user_errors import UserInputError
from longformer_preprocessing.tasks.conll2012 import read_documents

# experiments.conf: genres = ["bc", "bn", "mz", "nw", "pt", "tc", "wb"]
REFERENCE_GENRES = ["bc", "bn", "mz", "nw", "pt", "tc", "wb"]
# one OntoNotes 5.0 document id per genre, as the CoNLL-2012 files name them
DOCUMENT_IDS = ["bc/cctv/00/cctv_0000", "bn/abc/00/abc_0001", "mz/sinorama/10/ectb_1001", "nw/wsj/00/wsj_0002",
                "pt/nt/40/nt_4001", "tc/ch/00/ch_0001", "wb/eng/00/eng_0000"]


def coref_head(tmp_path=None, **flags) -> CorefHead:
    """The head as the task builds it (``add_head``) on a stand-in model of width 8."""
    cfg = LongformerCorefConfig(data=str(tmp_path), max_positions=4096, coref_ffnn_size=16, **flags)
    task = LongformerCorefTask(cfg, Dictionary())
    model = nn.Module()
    model.args = types.SimpleNamespace(encoder_embed_dim=8)
    model.span_heads = nn.ModuleDict()
    task.add_head(model)
    return model.span_heads["coref"]


def test_every_ontonotes_genre_the_reader_reads_has_its_own_trained_row(tmp_path):
    rows = []
    for doc_id in DOCUMENT_IDS:
        rows += [f"#begin document ({doc_id}); part 000", f"{doc_id} 0 0 Word - - - - - Speaker * (1)", "",
                 "#end document"]
    path = tmp_path / "genres.v4_gold_conll"
    path.write_text("\n".join(rows) + "\n")
    documents, bad = read_documents(str(path))
    assert not bad and [d.genre for d in documents] == REFERENCE_GENRES
    head = coref_head(tmp_path)
    other = head.genre_emb.num_embeddings - 1  # the last row: any genre OntoNotes does not have
    assert head.genre_emb.num_embeddings == len(REFERENCE_GENRES) + 1
    assert [genre_index(d.genre) for d in documents] == list(range(len(REFERENCE_GENRES)))
    assert genre_index("xx") == other


def test_parameters_truncated_normal_002_and_zero_biases(tmp_path):
    torch.manual_seed(0)
    head = coref_head(tmp_path)
    names = {name for name, _ in head.named_parameters()}
    assert {"width_emb.weight", "distance_emb.weight", "genre_emb.weight", "segment_distance_emb.weight",
            "mention_ffnn.0.weight", "fine_ffnn.3.weight"} <= names
    for name, p in head.named_parameters():
        if name.endswith("bias"):
            assert (p == 0).all(), name
        else:
            assert p.abs().max() <= 2 * 0.02, name  # cut at two standard deviations
            assert p.std() < 0.05, name
            if p.numel() >= 1000:  # 0.02 x 0.88, the std of a normal cut at 2 std
                assert p.std().item() == pytest.approx(0.02 * 0.88, rel=0.1), name


def test_segment_distance_buckets_follow_the_segment_length(tmp_path):
    # experiments.conf: max_training_sentences 5 at max_segment_len 256 ("best"), 3 at 384
    # (spanbert_base, bert_large), 3 at 512 (spanbert_large)
    assert [segment_distance_buckets(n) for n in (256, 384, 512)] == [5, 3, 3]
    assert segment_distance_buckets(4096) == 1  # the paper's Longformer: whole documents, one segment
    assert coref_head(tmp_path, segment_length=384).segment_distance_emb.num_embeddings == 3
    assert coref_head(tmp_path).segment_distance_emb.num_embeddings == 1  # 0: --max-positions, 4,096
    assert coref_head(tmp_path, segment_length=384, coref_max_segments=7).segment_distance_emb.num_embeddings == 7
    with pytest.raises(UserInputError, match="--coref-max-segments"):
        coref_head(tmp_path, coref_max_segments=-1)

