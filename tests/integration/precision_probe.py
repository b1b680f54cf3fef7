"""Run a fairseq console command (train, eval_lm, generate) with probes on the attention core.

    python precision_probe.py RECORD.json fairseq_cli.train ARGS...

runs ``fairseq_cli.train.cli_main()`` (what ``fairseq-train`` runs) on ARGS and writes to
RECORD.json the dtypes the attention core saw: ``qkv``, the dtypes of q, k, v of every call of
``longformer_attention`` from the self-attention module and the relative-position scores;
``softmax``, the dtype of every
score tensor the attention's softmax exponentiated (the PyTorch path's band and global-key
softmax, ``band_layout.exp_and_lse`` as its two callers see it, and every ``torch.softmax``
call: the global rows). The
probes wrap the functions and change nothing they compute.
"""
import importlib
import json
import sys

import torch

import fairseq_longformer  # noqa: F401  (the --user-dir given to fairseq: the same folder)
from fairseq_longformer.modules import relative_positions, self_attention
from longformer_kernels import band_layout, global_keys, sliding_chunks

record = {"qkv": [], "softmax": []}


def _probe_core(core):
    def probed(q, k, v, *args, **kwargs):
        record["qkv"].append([str(t.dtype) for t in (q, k, v)])
        return core(q, k, v, *args, **kwargs)
    return probed


def _probe_softmax(softmax):
    def probed(scores, *args, **kwargs):
        record["softmax"].append(str(scores.dtype))
        return softmax(scores, *args, **kwargs)
    return probed


def main() -> None:
    out, module = sys.argv[1], sys.argv[2]
    for module_calling_the_core in (self_attention, relative_positions):
        module_calling_the_core.longformer_attention = _probe_core(module_calling_the_core.longformer_attention)
    sliding_chunks.exp_and_lse = global_keys.exp_and_lse = _probe_softmax(band_layout.exp_and_lse)
    torch.softmax = _probe_softmax(torch.softmax)
    sys.argv = [module] + sys.argv[3:]
    try:
        importlib.import_module(module).cli_main()
    finally:
        with open(out, "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main()
