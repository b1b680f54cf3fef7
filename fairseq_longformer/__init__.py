"""fairseq-longformer: a fairseq plugin (``--user-dir fairseq_longformer``) that turns RoBERTa
into Longformer and BART into LED, plus the autoregressive character-level Longformer
(``longformer_lm``). Importing it registers the models, tasks and criteria;
``runtime.apply()`` comes first (every change the plugin makes to fairseq: ``runtime/__init__.py``).

Public names, for code that builds on the plugin without reaching into its modules (the tools in
``longformer_tools`` use these and the registered architectures only):

    LongformerSelfAttention     the attention module every model uses (fairseq's self_attn call;
                                ``attend`` stops before the output projection)
    LongformerAttentionConfig   its per-layer config (pattern, impl, projections, dropout)
    sinusoid                    Transformer-XL's relative position encoding r_delta, the one the
                                char-LM's relative positions project
    trust_checkpoints           a context in which fairseq checkpoint loads take a tool's
                                ``--trust-checkpoint`` (else they refuse files that hold code)
    UserInputError              the ValueError of a bad input the user can fix (one-line message)
"""
from . import runtime

runtime.apply()  # patches the fairseq stack before anything else runs

from .criterions import longformer_mlm as _criterion  # noqa: F401
from .models import longformer as _model  # noqa: F401
from .models import led as _led_model  # noqa: F401
from .models import longformer_lm as _lm_model  # noqa: F401
from .tasks import longformer_mlm as _task  # noqa: F401
from .criterions import longformer_classification as _classification_criterion  # noqa: F401
from .criterions import longformer_qa as _qa_criterion  # noqa: F401
from .tasks import longformer_classification as _classification_task  # noqa: F401
from .tasks import longformer_qa as _qa_task  # noqa: F401
from .criterions import longformer_wikihop as _wikihop_criterion  # noqa: F401
from .tasks import longformer_wikihop as _wikihop_task  # noqa: F401
from .criterions import longformer_hotpotqa as _hotpotqa_criterion  # noqa: F401
from .tasks import longformer_hotpotqa as _hotpotqa_task  # noqa: F401
from .criterions import longformer_coref as _coref_criterion  # noqa: F401
from .tasks import longformer_coref as _coref_task  # noqa: F401
from .modules.self_attention import LongformerAttentionConfig, LongformerSelfAttention  # noqa: F401  (public)
from .modules.relative_positions import sinusoid  # noqa: F401  (public)
from .runtime.checkpoints import trust_checkpoints  # noqa: F401  (public)
from .runtime.errors import UserInputError  # noqa: F401  (public)
