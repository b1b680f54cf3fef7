"""The global projections Q_g, K_g, V_g and their initialisation as copies of Q, K, V (or, for a
model trained from scratch, Q_g = K_g = a scaled identity: ``--global-init identity``).

The paper initialises the global projections of a model continued from RoBERTa as copies of the
local ones. That rule is needed wherever a model without them becomes a Longformer: a freshly
built module, a RoBERTa state dict loaded into the model (``upgrade_state_dict_named``), the
RoBERTa converter and the Hugging Face import of a RoBERTa folder. The name table and the copy
live here, once.

A model trained from scratch has nothing worth copying: with BERT's initialisation (std 0.02)
every attention score is near 0, so a global token's attention is uniform over the whole input
and a key's weight is 1 / N. A task whose global tokens must find the same token far away (a
WikiHop candidate's name and its mentions in the supports) then gets gradients of order 1 / N
for the match and, at the learning check's size, none of its seeds leaves chance. Starting Q_g
and K_g as IDENTITY_SCALE * I makes a global token's score for a key the scaled dot product of
their (layer-normed) inputs: it starts attending to copies of its own token, which the training
keeps or unlearns.
"""
import re
from typing import List, MutableMapping

import torch
from torch import Tensor, nn

# (local projection, its global twin), as attribute names of LongformerSelfAttention
GLOBAL_PROJECTIONS = (("q_proj", "q_global_proj"), ("k_proj", "k_global_proj"), ("v_proj", "v_global_proj"))
_TWIN = dict(GLOBAL_PROJECTIONS)
# a local projection's tensor in a state dict: "<...>self_attn.q_proj.weight" (and .bias)
_LOCAL_KEY = re.compile(r"(^|\.)self_attn\.(q_proj|k_proj|v_proj)\.(weight|bias)$")


@torch.no_grad()
def copy_local_to_global(attention: nn.Module) -> None:
    """Set ``attention``'s q/k/v_global_proj to copies of its q/k/v_proj (weights and biases);
    a module without global projections (``global_projections=False``) is left as it is."""
    for local, glob in GLOBAL_PROJECTIONS:
        source, target = getattr(attention, local), getattr(attention, glob, None)
        if target is None:
            continue
        target.weight.copy_(source.weight)
        if source.bias is not None:
            target.bias.copy_(source.bias)


# Q_g = K_g = IDENTITY_SCALE * I: the score of a key holding the query's own token is
# IDENTITY_SCALE^2 * |x_h|^2 / sqrt(d) = 2 * sqrt(d) per head of width d (unit-variance inputs:
# 8 at d = 16), that of an unrelated token about 2 +- 2: copies win over the other tokens of a
# few hundred (a larger scale saturates the softmax and its gradients)
GLOBAL_INITS = ("copy", "identity")
IDENTITY_SCALE = 1.4


@torch.no_grad()
def identity_global_queries_keys(attention: nn.Module) -> None:
    """Set ``attention``'s q_global_proj and k_global_proj to IDENTITY_SCALE * I with zero bias
    (under ``--no-global-projections`` those are the local Q and K: the projections global tokens
    use); V_g is left as it is."""
    for name in ("q_global_proj", "k_global_proj"):
        projection = getattr(attention, name)
        projection.weight.copy_(IDENTITY_SCALE * torch.eye(*projection.weight.shape))
        if projection.bias is not None:
            projection.bias.zero_()


def add_missing_global_projections(state_dict: MutableMapping[str, Tensor], prefix: str = "") -> List[str]:
    """For every self-attention in ``state_dict`` (keys starting with ``prefix``) whose global
    projections are absent, add them as clones of Q, K, V; global tensors already there are kept.
    Works on any layout that names the module ``self_attn`` (fairseq's). Returns the added keys."""
    added = []
    for key in list(state_dict):
        match = _LOCAL_KEY.search(key) if key.startswith(prefix) else None
        if match is None:
            continue
        local = match.group(2)
        global_key = key[:match.start(2)] + _TWIN[local] + key[match.end(2):]
        if global_key not in state_dict:
            state_dict[global_key] = state_dict[key].clone()
            added.append(global_key)
    return added
