"""Two learning rates with one schedule each, through fairseq's own parameter-group tags.

fairseq tags parameters with ``param_group`` and ``optim_overrides={"optimizer": {"lr_scale":
s}}``, but only its ``composite`` optimizer reads them, and that one is configured by a
``groups`` dictionary that fairseq-train's argparse cannot take (``--groups``: the Dict field
becomes ``type=Dict[str, Any]``, an error on any value). Replaced fairseq behaviour: every tagged
parameter trains at the one ``--lr`` (``optim.build_optimizer`` flattens them into one torch
param group and ``FairseqOptimizer.set_lr`` sets every group to the scheduler's rate), so the
coreference head (task ``longformer_coref``) would learn at the encoder's 1e-5. Here
(``build_optimizer``, ``set_lr``), parameters of one ``lr_scale`` form one torch parameter group
(in order of first appearance: the encoder's first, whose rate fairseq logs as ``lr``), and
``set_lr`` gives each group the scheduler's rate times its scale. Untagged runs are unchanged
(one group, scale 1). fp16 with flattened gradients would fold the groups into one tensor
(``fp16_folds_groups``): refused with the flag that avoids it (``FP16_FOLDS_GROUPS``).
"""
from typing import Callable

from fairseq import optim

FP16_FOLDS_GROUPS = ("--fp16 flattens the parameters into one tensor, which loses the head's own learning rate: "
                     "add --fp16-no-flatten-grads")


def lr_scale(p) -> float:
    """The ``lr_scale`` of a parameter's fairseq ``optim_overrides`` (1 when untagged)."""
    return float(((getattr(p, "optim_overrides", None) or {}).get("optimizer") or {}).get("lr_scale", 1.0))


def grouping_by_lr_scale(original: Callable) -> Callable:
    """``original`` (fairseq's ``optim.build_optimizer``), given one torch parameter group per
    ``lr_scale`` when the parameters carry more than one."""

    def build_optimizer(cfg, params, *extra_args, **extra_kwargs):
        params = list(params)
        if params and all(isinstance(p, dict) for p in params):
            params = [t for p in params for t in p.values()]
        params = [p for p in params if p.requires_grad]
        scales = {}
        for p in params:
            scales.setdefault(lr_scale(p), []).append(p)
        if len(scales) > 1:
            groups = [{"params": ps, "lr_scale": scale} for scale, ps in scales.items()]
            # the registry's builder: fairseq's build_optimizer would flatten the groups again
            return optim._build_optimizer(cfg, groups, *extra_args, **extra_kwargs)
        return original(cfg, params, *extra_args, **extra_kwargs)

    return build_optimizer


def set_lr(self, lr) -> None:
    """``FairseqOptimizer.set_lr``: each group at ``lr`` times its ``lr_scale``."""
    for param_group in self.param_groups:
        param_group["lr"] = lr * param_group.get("lr_scale", 1.0)


def fp16_folds_groups(cfg, params) -> bool:
    """Whether fairseq's FP16Optimizer would flatten ``params`` of several ``lr_scale`` into one
    tensor (fp16 without ``--fp16-no-flatten-grads``; bf16 is never flattened)."""
    flatten = not getattr(cfg.common, "fp16_no_flatten_grads", False) and not getattr(cfg.common, "bf16", False)
    return flatten and len({lr_scale(p) for p in params}) > 1
