"""fairseq-longformer: a fairseq plugin (``--user-dir fairseq_longformer``) that turns RoBERTa
into Longformer. Importing it registers the model, task and criterion; ``compat`` comes first."""
from . import compat  # noqa: F401  (must patch the fairseq stack before anything else runs)
from .criterions import longformer_mlm as _criterion  # noqa: F401
from .models import longformer as _model  # noqa: F401
from .tasks import longformer_mlm as _task  # noqa: F401
