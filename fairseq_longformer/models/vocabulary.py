"""Loading a checkpoint into a model whose dictionary grew: a task that adds symbols (WikiHop's
``[q] [/q] [ent] [/ent]``, HotpotQA's ``[q] [/q] <t> </t> [s]``, appended after ``<mask>``) builds
embeddings with more rows than the pretrained checkpoint holds. fairseq loads state dicts strictly, so the checkpoint's token rows are
extended with the model's own freshly initialised rows (random, as the paper starts its new
tokens); every pretrained row keeps its id.
"""
import logging
from typing import MutableMapping

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

# the state-dict entries with one row per dictionary symbol (the LM head's output is tied to the
# embedding, but both keys are saved)
TOKEN_ROW_KEYS = ("encoder.sentence_encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias")


def grow_token_rows(model_state: MutableMapping[str, Tensor], state_dict: MutableMapping[str, Tensor],
                    prefix: str) -> None:
    """Append the model's rows beyond the checkpoint's vocabulary to every token-row entry of
    ``state_dict`` that is shorter than the model's; a longer one is left for the strict load to
    refuse (a checkpoint with symbols the task's dictionary lacks is not this model's)."""
    for key in TOKEN_ROW_KEYS:
        name = prefix + key
        if name not in state_dict or name not in model_state:
            continue
        stored, current = state_dict[name], model_state[name]
        if stored.shape[0] < current.shape[0] and stored.shape[1:] == current.shape[1:]:
            extra = current[stored.shape[0]:].detach().to(dtype=stored.dtype, device=stored.device)
            state_dict[name] = torch.cat([stored, extra], dim=0)
            logger.info(f"{name}: {stored.shape[0]} rows in the checkpoint, {current.shape[0]} in the model's "
                        f"dictionary: the {extra.shape[0]} new rows start from the model's initialisation")
