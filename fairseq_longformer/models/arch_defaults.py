"""What the registered architectures share: the flags a user left out set to the architecture's
defaults, the user's values kept."""
from fairseq.utils import safe_getattr


def set_defaults(args, **defaults) -> None:
    """Each flag in ``defaults`` set on ``args`` to its default where ``args`` has no value for it
    (``safe_getattr``: a missing flag, or None in a config)."""
    for name, value in defaults.items():
        setattr(args, name, safe_getattr(args, name, value))
