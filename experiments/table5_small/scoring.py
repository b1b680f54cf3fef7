"""Bits per masked token of a checkpoint on the held-out books, the same way for every model."""
import math
from pathlib import Path
from typing import Dict


def mlm_bits(checkpoint: Path, data: Path, tokens_per_sample: int, seed: int, period: int,
             batch_size: int = 8) -> Dict:
    """Bits per masked token of ``checkpoint`` on the valid split, blocks of ``tokens_per_sample``.

    The checkpoint's own task (masked_lm or longformer_mlm) builds the blocks and masks them with
    fairseq's seeded masking; the loss is computed here, the same way for every model.

    Also split out: the "tile starts", block positions i > 0 with i % period == 0 (period =
    RoBERTa's length). A copied table gives them RoBERTa's first position, where RoBERTa only
    ever saw <s> (each of its blocks starts with it), so a copy-initialised model predicts <s>
    there. RoBERTa's own blocks have no such position.
    """
    import torch
    import torch.nn.functional as F
    from fairseq import checkpoint_utils

    import fairseq_longformer  # noqa: F401  (registers the Longformer model, task, criterion)

    overrides = {"data": str(data), "tokens_per_sample": tokens_per_sample,
                 "sample_break_mode": "none", "seed": seed, "pad_to_multiple": 1}
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides=overrides)
    model = models[0].eval()
    task.load_dataset("valid", combine=False, epoch=1)
    iterator = task.get_batch_iterator(dataset=task.dataset("valid"), max_sentences=batch_size,
                                       seed=seed, num_workers=0).next_epoch_itr(shuffle=False)
    pad = task.source_dictionary.pad()
    sums = {"all": [0.0, 0], "tile_starts": [0.0, 0]}
    blocks = 0
    with torch.no_grad():
        for sample in iterator:
            target = sample["target"]
            mask = target.ne(pad)
            logits = model(**sample["net_input"], masked_tokens=mask)[0]
            loss = F.cross_entropy(logits.float(), target[mask], reduction="none")
            position = torch.arange(target.size(1)).expand_as(target)[mask]
            starts = (position > 0) & (position % period == 0)
            sums["all"][0] += float(loss.sum())
            sums["all"][1] += int(mask.sum())
            sums["tile_starts"][0] += float(loss[starts].sum())
            sums["tile_starts"][1] += int(starts.sum())
            blocks += target.size(0)
    (total, masked), (start_total, start_count) = sums["all"], sums["tile_starts"]
    bits = lambda nats, n: nats / max(n, 1) / math.log(2)  # noqa: E731
    return {"bpc": bits(total, masked), "masked_tokens": masked, "blocks": blocks,
            "bpc_without_tile_starts": bits(total - start_total, masked - start_count),
            "tile_start_bpc": bits(start_total, start_count) if start_count else None,
            "tile_start_tokens": start_count}
