"""fairseq_longformer.models.global_projections: Q_g, K_g, V_g start as copies of Q, K, V, in modules
and in state dicts, and global tensors already there are kept."""
import torch
from torch import nn

from fairseq_longformer.models.global_projections import add_missing_global_projections, copy_local_to_global


def test_state_dict_gets_copies_of_q_k_v_only_where_missing():
    prefix = "encoder.sentence_encoder.layers."
    state = {}
    for layer in range(2):
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            state[f"{prefix}{layer}.self_attn.{name}.weight"] = torch.randn(4, 4)
            state[f"{prefix}{layer}.self_attn.{name}.bias"] = torch.randn(4)
    kept = torch.randn(4, 4)
    state[f"{prefix}1.self_attn.k_global_proj.weight"] = kept
    state["decoder.layers.0.self_attn.q_proj.weight"] = torch.randn(4, 4)  # outside the prefix
    added = add_missing_global_projections(state, prefix=prefix)
    assert len(added) == 2 * 6 - 1 and "decoder.layers.0.self_attn.q_global_proj.weight" not in state
    for layer in range(2):
        for local, glob in (("q_proj", "q_global_proj"), ("k_proj", "k_global_proj"), ("v_proj", "v_global_proj")):
            for p in ("weight", "bias"):
                source, copy = (state[f"{prefix}{layer}.self_attn.{n}.{p}"] for n in (local, glob))
                if (layer, glob, p) == (1, "k_global_proj", "weight"):
                    assert copy is kept
                    continue
                assert torch.equal(copy, source) and copy.data_ptr() != source.data_ptr()  # a clone
    assert not any("out_global_proj" in k for k in state)


def test_module_copy_and_a_module_without_global_projections():
    attention = nn.Module()
    for name in ("q_proj", "k_proj", "v_proj", "q_global_proj", "k_global_proj", "v_global_proj"):
        setattr(attention, name, nn.Linear(4, 4))
    copy_local_to_global(attention)
    for local, glob in (("q_proj", "q_global_proj"), ("k_proj", "k_global_proj"), ("v_proj", "v_global_proj")):
        assert torch.equal(getattr(attention, glob).weight, getattr(attention, local).weight)
        assert torch.equal(getattr(attention, glob).bias, getattr(attention, local).bias)
    causal = nn.Module()  # a causal LM's attention has no global projections: nothing to do
    for name in ("q_proj", "k_proj", "v_proj"):
        setattr(causal, name, nn.Linear(4, 4))
    copy_local_to_global(causal)
    assert not hasattr(causal, "q_global_proj")
