"""Extending learned position embeddings beyond RoBERTa's 512 positions (paper, sec. 5).

fairseq's learned positions have ``positions + padding_idx + 1`` rows: rows 0 .. padding_idx are
reserved (position ids start at padding_idx + 1 = 2), then one row per position. Extending keeps
the reserved rows and fills the new positions either by tiling the source's learned rows in order
(the paper's "copy" initialisation) or randomly, every learned row included (its
ablation, Table 5).
"""
import torch
from torch import Tensor


def check_extendable(source_positions: int, target_positions: int) -> None:
    """Raise ValueError unless ``target_positions`` >= ``source_positions``: positions are only
    ever extended (a shorter table would drop positions the source model learned)."""
    if target_positions < source_positions:
        raise ValueError(f"--max-positions {target_positions} is smaller than the source model's "
                         f"{source_positions} positions: positions can only be extended")


def extend_positions(weight: Tensor, target_positions: int, padding_idx: int = 1,
                     init: str = "copy", generator: torch.Generator = None) -> Tensor:
    """(source_positions + padding_idx + 1, C) -> (target_positions + padding_idx + 1, C).

    ``init="copy"`` tiles the learned rows; ``init="random"`` redraws every learned
    row from N(0, 0.02), BERT's init (the reserved rows are kept).
    """
    reserved = padding_idx + 1
    source_positions = weight.shape[0] - reserved
    if source_positions <= 0:
        raise ValueError(f"position table of {weight.shape[0]} rows has no learned rows "
                         f"beyond the {reserved} reserved ones")
    check_extendable(source_positions, target_positions)
    learned = weight[reserved:]
    if init == "copy":
        repeats = -(-target_positions // source_positions)
        new = learned.repeat(repeats, 1)[:target_positions]
    elif init == "random":
        new = torch.empty(target_positions, weight.shape[1], dtype=weight.dtype)
        new.normal_(0.0, 0.02, generator=generator)
    else:
        raise ValueError(f"position init must be 'copy' or 'random', got {init!r}")
    return torch.cat([weight[:reserved], new.to(weight.dtype)], dim=0)
