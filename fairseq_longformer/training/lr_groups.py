"""The optimizer's parameter groups: a learning rate per ``lr_scale`` tag, and no weight decay on
biases and LayerNorm parameters.

Learning rates: fairseq tags parameters with ``param_group`` and ``optim_overrides={"optimizer":
{"lr_scale": s}}``, but only its ``composite`` optimizer reads them, and that one is configured by
a ``groups`` dictionary that fairseq-train's argparse cannot take (``--groups``: the Dict field
becomes ``type=Dict[str, Any]``, an error on any value). Replaced fairseq behaviour: every tagged
parameter trains at the one ``--lr`` (``optim.build_optimizer`` flattens them into one torch
param group and ``FairseqOptimizer.set_lr`` sets every group to the scheduler's rate), so the
coreference head (task ``longformer_coref``) would learn at the encoder's 1e-5. Here
(``build_optimizer``, ``set_lr``), ``set_lr`` gives each group the scheduler's rate times its
``lr_scale``.

Weight decay: fairseq applies ``--weight-decay`` to every parameter, LayerNorm's gain and bias
and every bias included; BERT's and RoBERTa's fine-tuning (and the paper's code) exempt those.
Here a parameter of one dimension (every bias, every LayerNorm weight and bias, the embeddings'
LayerNorm too: the plugin's models, encoder, decoder and heads, hold no other) trains with weight
decay 0; the rest keep ``--weight-decay``.

Parameters of one (``lr_scale``, exempt) pair form one torch parameter group, in order of first
appearance (the encoder's embedding first, whose rate fairseq logs as ``lr``). A run with one
pair (no tags, ``--weight-decay 0``) is fairseq's own single group. fp16 with flattened
gradients would fold the groups into one tensor (``fp16_folds_groups``): the runtime builds it
unflattened instead, as ``--fp16-no-flatten-grads`` does (``FP16_KEEPS_GROUPS``).
"""
from typing import Callable, Dict, List, Tuple

from fairseq import optim

FP16_KEEPS_GROUPS = ("--fp16: parameters kept unflattened (as with --fp16-no-flatten-grads), so that the "
                     "optimizer's groups keep their own learning rate and weight decay")


def lr_scale(p) -> float:
    """The ``lr_scale`` of a parameter's fairseq ``optim_overrides`` (1 when untagged)."""
    return float(((getattr(p, "optim_overrides", None) or {}).get("optimizer") or {}).get("lr_scale", 1.0))


def exempt_from_weight_decay(p) -> bool:
    """A bias or a LayerNorm weight or bias: a parameter of one dimension."""
    return p.dim() < 2


def groups_of(params, weight_decay: float) -> Dict[Tuple[float, bool], List]:
    """(lr_scale, exempt from weight decay) -> its parameters, in order of first appearance; the
    exemption only when ``weight_decay`` is on."""
    groups = {}
    for p in params:
        groups.setdefault((lr_scale(p), weight_decay > 0 and exempt_from_weight_decay(p)), []).append(p)
    return groups


def grouping_by_lr_scale_and_decay(original: Callable) -> Callable:
    """``original`` (fairseq's ``optim.build_optimizer``), given one torch parameter group per
    (``lr_scale``, weight decay) when the parameters fall into more than one."""

    def build_optimizer(cfg, params, *extra_args, **extra_kwargs):
        params = list(params)
        if params and all(isinstance(p, dict) for p in params):
            params = [t for p in params for t in p.values()]
        params = [p for p in params if p.requires_grad]
        groups = groups_of(params, float(getattr(cfg, "weight_decay", 0.0) or 0.0))
        if len(groups) > 1:
            groups = [{"params": ps, "lr_scale": scale, **({"weight_decay": 0.0} if exempt else {})}
                      for (scale, exempt), ps in groups.items()]
            # the registry's builder: fairseq's build_optimizer would flatten the groups again
            return optim._build_optimizer(cfg, groups, *extra_args, **extra_kwargs)
        return original(cfg, params, *extra_args, **extra_kwargs)

    return build_optimizer


def set_lr(self, lr) -> None:
    """``FairseqOptimizer.set_lr``: each group at ``lr`` times its ``lr_scale``."""
    for param_group in self.param_groups:
        param_group["lr"] = lr * param_group.get("lr_scale", 1.0)


def fp16_folds_groups(cfg, params) -> bool:
    """Whether fairseq's FP16Optimizer would flatten ``params`` of several groups into one tensor
    (fp16 without ``--fp16-no-flatten-grads``; bf16 is never flattened)."""
    flatten = not getattr(cfg.common, "fp16_no_flatten_grads", False) and not getattr(cfg.common, "bf16", False)
    return flatten and len(groups_of(params, float(getattr(cfg.optimizer, "weight_decay", 0.0) or 0.0))) > 1
