"""fairseq-longformer: a fairseq plugin (``--user-dir fairseq_longformer``) that turns RoBERTa
into Longformer and BART into LED, plus the autoregressive character-level Longformer
(``longformer_lm``). Importing it registers the models, tasks and criteria;
``compat`` comes first."""
from . import compat  # noqa: F401  (must patch the fairseq stack before anything else runs)
from .criterions import longformer_mlm as _criterion  # noqa: F401
from .models import longformer as _model  # noqa: F401
from .models import led as _led_model  # noqa: F401
from .models import longformer_lm as _lm_model  # noqa: F401
from .tasks import longformer_mlm as _task  # noqa: F401
from .criterions import longformer_classification as _classification_criterion  # noqa: F401
from .criterions import longformer_qa as _qa_criterion  # noqa: F401
from .tasks import longformer_classification as _classification_task  # noqa: F401
from .tasks import longformer_qa as _qa_task  # noqa: F401
