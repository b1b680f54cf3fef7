"""``--no-global-projections``: global attention through the local Q, K, V (the paper's
"no linear proj." ablation, Table 10).

Each self-attention's ``q/k/v_global_proj`` become the very modules ``q/k/v_proj`` (one set of
Parameters under two names), so the attention code runs unchanged and the optimizer sees each
weight once (``parameters()`` de-duplicates). Two state-dict hooks keep checkpoints honest:
saving drops the global names (a checkpoint holds Q, K, V once; a model with separate
projections loading it starts Q_g, K_g, V_g as copies, the usual upgrade), and loading makes
the global names equal to the local ones, so a checkpoint with trained, different Q_g, K_g, V_g
cannot overwrite the shared weights with its global ones.
"""
from torch import nn

from .global_projections import GLOBAL_PROJECTIONS
from ..modules.self_attention import LongformerSelfAttention


def _drop_global_keys(module, state_dict, prefix, local_metadata):
    for _, glob in GLOBAL_PROJECTIONS:
        for key in [k for k in state_dict if k.startswith(prefix + glob + ".")]:
            del state_dict[key]
    return state_dict


def _global_keys_from_local(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for local, glob in GLOBAL_PROJECTIONS:
        for key in [k for k in state_dict if k.startswith(prefix + local + ".")]:
            state_dict[prefix + glob + key[len(prefix + local):]] = state_dict[key]


def share_global_projections(model: nn.Module) -> int:
    """Tie every LongformerSelfAttention's global projections to its local ones, in place.
    Returns the number of attention modules tied (0: the model has no global projections)."""
    tied = 0
    for module in model.modules():
        if not isinstance(module, LongformerSelfAttention) or not module.config.global_projections:
            continue
        for local, glob in GLOBAL_PROJECTIONS:
            setattr(module, glob, getattr(module, local))
        module._register_state_dict_hook(_drop_global_keys)
        module._register_load_state_dict_pre_hook(_global_keys_from_local)
        tied += 1
    return tied
