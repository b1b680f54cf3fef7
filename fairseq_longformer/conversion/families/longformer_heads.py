"""The task head at the HF boundary: which one an export carries, its class, labels and task; heads no
transformers class computes (HotpotQA, WikiHop, coref) are refused."""
from dataclasses import dataclass, fields
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn


class HeadRef(NamedTuple):
    kind: str
    name: str


HEAD_MODULES = {"classification": "classification_heads", "span": "span_heads"}  # kind -> ModuleDict


@dataclass(frozen=True)
class HeadTask:
    task: str
    name_field: str
    token_dict: str
    label_dict: Optional[str] = None

    @property
    def default_name(self) -> str:
        from fairseq.tasks import TASK_DATACLASS_REGISTRY
        return {f.name: f.default for f in fields(TASK_DATACLASS_REGISTRY[self.task])}[self.name_field]

    def flags(self, name: str) -> List[str]:  # the criterion has the task's name
        return ["--task", self.task, "--criterion", self.task, "--" + self.name_field.replace("_", "-"), name]


HEAD_TASKS = {"classification": HeadTask("longformer_classification", "classification_head_name", "input0/dict.txt",
                                          "label/dict.txt"),
              "span": HeadTask("longformer_qa", "span_head_name", "dict.txt")}
MLM_TOKEN_DICT = "dict.txt"  # longformer_mlm reads DATA/dict.txt
HOTPOTQA_HEAD = ("a HotpotQA head (task longformer_hotpotqa: answer span, question type, supporting paragraphs "
                 "and sentences)")
NO_HF_CLASS = {  # a tensor only that head holds -> what it is (span heads told apart by their layers' names)
    "question_type.out_proj.weight": HOTPOTQA_HEAD,
    "question_type.weight": HOTPOTQA_HEAD,  # checkpoints from before its type head had two layers
    "candidate_score.weight": "a WikiHop candidate head (task longformer_wikihop: one logit per [ent] token)",
    "mention_ffnn.0.weight": "a coreference head (task longformer_coref: the coarse-to-fine span and antecedent "
                             "scorer)",
}


def dictionary_files(task_name: Optional[str]):
    """(token dict, label dict or None) that task ``task_name`` reads, relative to its --data."""
    return next(((t.token_dict, t.label_dict) for t in HEAD_TASKS.values() if t.task == task_name),
                (MLM_TOKEN_DICT, None))


def model_heads(model) -> List[HeadRef]:
    return [HeadRef(kind, name) for kind, attr in HEAD_MODULES.items() for name in getattr(model, attr, {})]


def checkpoint_heads(model_state: Mapping[str, Tensor]) -> List[HeadRef]:
    """The heads a checkpoint's state dict holds, in its order."""
    return list(dict.fromkeys(HeadRef(kind, key.split(".")[1]) for key in model_state
                              for kind, attr in HEAD_MODULES.items() if key.startswith(attr + ".")))


def choose_head(heads: Sequence[HeadRef], name: Optional[str], where: str) -> Optional[HeadRef]:
    """The head to export: the one named, else the only one, else None (a masked LM)."""
    listing = ", ".join(f"{h.name!r} ({h.kind})" for h in heads) or "none"
    if name is None:
        if len(heads) > 1:
            raise ValueError(f"{where} has {len(heads)} heads ({listing}) and a Hugging Face model carries "
                             "one: choose it with --head-name NAME")
        return heads[0] if heads else None
    named = [h for h in heads if h.name == name]
    if len(named) != 1:
        raise ValueError(f"--head-name {name!r}: {where} has {'several heads' if named else 'no head'} of that "
                         f"name; its heads: {listing}")
    return named[0]


def refuse_heads_without_hf_class(head: Optional[HeadRef], tensor_names) -> None:
    """ValueError (one line) when ``head``, holding ``tensor_names``, is a head no transformers class computes."""
    for name, what in NO_HF_CLASS.items() if head is not None and head.kind == "span" else ():
        if name in tensor_names:
            raise ValueError(f"head {head.name!r} is {what}, which no transformers class computes: nothing written; "
                             "export the encoder alone with --encoder-only (LongformerForMaskedLM, whose encoder "
                             "LongformerModel.from_pretrained loads)")


def head_module(model, head: HeadRef) -> nn.Module:
    return getattr(model, HEAD_MODULES[head.kind])[head.name]


def register_head(model, head: HeadRef, outputs: int, inner_dim: Optional[int] = None) -> None:
    """Add ``head`` with fresh weights through the model's own registration (as the tasks do)."""
    if head.kind == "classification":
        model.register_classification_head(head.name, num_classes=outputs, inner_dim=inner_dim)
    else:
        model.register_span_head(head.name)  # always C -> 2


def checkpoint_head_tensors(model_state: Mapping[str, Tensor], head: HeadRef) -> Dict[str, Tensor]:
    """The head's tensors by name inside it, taken before fairseq's loader deletes heads its task lacks."""
    prefix = f"{HEAD_MODULES[head.kind]}.{head.name}."
    return {key[len(prefix):]: value for key, value in model_state.items() if key.startswith(prefix)}


def keep_only_head(model, head: Optional[HeadRef], tensors: Mapping[str, Tensor]) -> None:
    """``model`` with exactly ``head`` holding ``tensors`` (fairseq's loader re-inits a head of another size)."""
    for attr in HEAD_MODULES.values():
        getattr(model, attr, nn.ModuleDict()).clear()
    if head is not None:  # a classification head sized by its tensors; a span head's always C -> 2
        register_head(model, head, *((tensors["out_proj.weight"].shape[0], tensors["dense.weight"].shape[0])
                                     if head.kind == "classification" else (2,)))
        head_module(model, head).load_state_dict(dict(tensors), strict=True)


def head_layout(model, head: HeadRef, hidden: int, dropout: float) -> Tuple[int, List[str], List[str]]:
    """(L: classes, or 2 for a span head's start and end; what HF's head class cannot represent; what it drops)."""
    module = head_module(model, head)
    if head.kind != "classification":  # a span head is exactly HF's qa_outputs
        return module.qa_outputs.out_features, [], []
    problems = [f"classification head {head.name!r}: inner dimension {module.dense.out_features}; HF's "
                f"classifier.dense is hidden x hidden ({hidden})"] if module.dense.out_features != hidden else []
    if module.activation_fn is not torch.tanh:
        problems.append(f"--pooler-activation-fn: classification head {head.name!r} uses "
                        f"{getattr(module.activation_fn, '__name__', module.activation_fn)}; HF's classifier "
                        "hard-codes tanh")
    if hasattr(module.out_proj, "weight_orig"):
        problems.append("--spectral-norm-classification-head: HF's classifier.out_proj is a plain Linear")
    warnings = [] if module.dropout.p == dropout else [
        f"--pooler-dropout {module.dropout.p} is not exported: HF's classifier applies hidden_dropout_prob "
        f"({dropout}) (training only; outputs in eval mode are unaffected)"]
    return module.out_proj.out_features, problems, warnings


def head_config(head: Optional[HeadRef], outputs: int, labels: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """A head export's LongformerConfig fields: num_labels (QA), or id2label/label2id (LABEL_k without labels)."""
    if head is None:
        return {}
    if head.kind == "span":
        return {"num_labels": outputs}
    names = list(labels) if labels is not None else [f"LABEL_{k}" for k in range(outputs)]
    if len(names) != outputs:
        raise ValueError(f"the label dictionary has {len(names)} labels but classification head {head.name!r} has "
                         f"{outputs} outputs: pass the label/dict.txt the model was trained with (--label-dict)")
    return {"id2label": dict(enumerate(names)), "label2id": {n: k for k, n in enumerate(names)},
            "problem_type": "single_label_classification"}


def task_labels(task, head: Optional[HeadRef]) -> Optional[List[str]]:
    """The class names of ``head`` when it is the checkpoint task's own classification head; else None."""
    if head is None or head.kind != "classification" or not hasattr(task, "label_dictionary"):
        return None
    if getattr(task.cfg, HEAD_TASKS["classification"].name_field, None) != head.name:
        return None  # another head than the one the task's label dictionary describes
    return list(task.label_names())
