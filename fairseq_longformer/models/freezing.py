"""``--train-new-positions-only N``: freeze every RoBERTa weight, train only the new positions.

The paper's Table 5 row "Longformer (train extra pos. embed. only)": after conversion the
position table has ``padding_idx + 1`` reserved rows, then the N rows that came from RoBERTa,
then the new rows (copies of those N when converted with ``--init-positions copy``). Only the
new rows learn:

  * every parameter except the position table gets ``requires_grad=False`` (fairseq's trainer
    hands the optimizer only parameters that require grad, so they are not even in it);
  * the position table keeps ``requires_grad=True`` and a gradient hook zeroes the gradient of
    its reserved and RoBERTa rows. With a zero gradient, Adam, SGD (with momentum) and Adagrad
    leave those rows exactly where they are: their moments stay zero and the update is 0.
  * weight decay would still shrink the frozen rows (decay does not look at the gradient), so a
    weight decay > 0 is refused.

N is RoBERTa's position count (512 for roberta.base); ``longformer-convert-roberta`` prints it and
keeps it in the checkpoint's ``extra_state["longformer_conversion"]["roberta_positions"]``.
"""
import logging

import torch
from fairseq.utils import safe_getattr
from torch import nn

logger = logging.getLogger(__name__)

FLAG = "--train-new-positions-only"


def positions_table(model: nn.Module) -> nn.Embedding:
    """The learned position embedding of a RoBERTa-style model (encoder.sentence_encoder)."""
    embed_positions = getattr(model.encoder.sentence_encoder, "embed_positions", None)
    if embed_positions is None or not isinstance(getattr(embed_positions, "weight", None), nn.Parameter):
        raise ValueError(f"{FLAG} needs learned position embeddings; this model has none")
    return embed_positions


def freeze_all_but_new_positions(model: nn.Module, roberta_positions: int) -> int:
    """Freeze ``model`` except the position rows past the first ``roberta_positions``.

    Returns the number of trainable rows. Rows 0 .. padding_idx (reserved) and the RoBERTa rows
    get a zero gradient through a hook; every other parameter stops requiring grad.
    """
    embed_positions = positions_table(model)
    weight = embed_positions.weight
    reserved = embed_positions.padding_idx + 1
    learned = weight.shape[0] - reserved
    if not isinstance(roberta_positions, int) or roberta_positions < 1:
        raise ValueError(f"{FLAG} takes RoBERTa's position count (an int >= 1), got {roberta_positions!r}")
    if roberta_positions >= learned:
        raise ValueError(
            f"{FLAG} {roberta_positions}: the model has only {learned} positions, so no position is "
            f"new; extend the positions first (longformer-convert-roberta --max-positions) and pass "
            f"the source RoBERTa's count (512 for roberta.base)"
        )
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    weight.requires_grad_(True)

    frozen_rows = reserved + roberta_positions
    keep = torch.zeros(weight.shape[0], 1, dtype=weight.dtype, device=weight.device)
    keep[frozen_rows:] = 1.0

    def zero_roberta_rows(grad):
        # a new tensor, not an in-place edit: autograd may hand the hook a gradient it still uses
        return grad * keep.to(device=grad.device, dtype=grad.dtype)

    weight.register_hook(zero_roberta_rows)
    trainable = weight.shape[0] - frozen_rows
    logger.info(f"{FLAG}: training {trainable} new position rows ({trainable * weight.shape[1]} "
                f"parameters); every other weight and the first {roberta_positions} positions are frozen")
    return trainable


def apply_from_args(model: nn.Module, args) -> nn.Module:
    """The one call in ``LongformerModel.build_model``: apply the flag when it is set."""
    roberta_positions = safe_getattr(args, "train_new_positions_only", None)
    if roberta_positions is None:
        return model
    weight_decay = safe_getattr(args, "weight_decay", 0.0) or 0.0
    if weight_decay > 0:
        raise ValueError(
            f"{FLAG} with --weight-decay {weight_decay}: weight decay moves every row of the position "
            "table, the frozen RoBERTa rows included; use --weight-decay 0"
        )
    freeze_all_but_new_positions(model, int(roberta_positions))
    return model
