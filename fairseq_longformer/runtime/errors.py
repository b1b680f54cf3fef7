"""Bad input reported as one line by fairseq's own CLIs (fairseq-train, -eval-lm, -generate).

fairseq's CLIs have no error handling of their own: whatever the plugin raises ends as a
traceback. The plugin raises ``UserInputError`` (a ValueError) for a problem the user can fix (a
checkpoint refused as code, a task run with a criterion it cannot work with, an evaluation
context longer than its blocks); ``install_excepthook`` makes such an uncaught error (and a
ValueError raised in the plugin's own code: ``is_user_error``) print ``error: <message>`` on
stderr and exit 1, with no traceback. Every other exception keeps Python's report. Installed
when a fairseq CLI parses its arguments with the plugin loaded; fairseq-hydra-train prints the
one line through hydra (``UserInputError`` is a ``CompactHydraException`` too).
"""
import os
import sys

from longformer_common.errors import UserInputError  # noqa: F401  (defined at the bottom: every package raises it)

# the plugin's folder (fairseq_longformer/), one above this runtime/ package
_PLUGIN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_user_error(error: BaseException, traceback) -> bool:
    """A UserInputError, or a ValueError raised in the plugin's own code: by the project's rule
    (bad input raises ValueError naming the argument, ``assert`` guards internal invariants) one
    of its input checks (``--train-mask-prob``, the attention config's ranges, ...), which,
    raised inside fairseq's stack, reached the user as a traceback's last line."""
    if isinstance(error, UserInputError):
        return True
    if not isinstance(error, ValueError) or traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    return os.path.abspath(traceback.tb_frame.f_code.co_filename).startswith(_PLUGIN)


def _report_user_errors(previous):
    def excepthook(kind, error, traceback):
        if is_user_error(error, traceback):
            print(f"error: {error}", file=sys.stderr)
            return
        previous(kind, error, traceback)

    excepthook._longformer_user_errors = True
    return excepthook


def install_excepthook() -> None:
    """Report uncaught UserInputErrors as one line (idempotent)."""
    if not getattr(sys.excepthook, "_longformer_user_errors", False):
        sys.excepthook = _report_user_errors(sys.excepthook)


def check_cli_args(args) -> None:
    """Flag combinations fairseq's CLIs accept and then fail on with a traceback."""
    window = getattr(args, "context_window", 0) or 0
    block = getattr(args, "tokens_per_sample", None)
    if window > 0 and block is not None and window >= block:
        # eval-lm scores blocks of tokens-per-sample minus context-window tokens: none is left
        # (ZeroDivisionError in fairseq's block builder)
        raise UserInputError(f"--context-window {window} must be smaller than --tokens-per-sample {block}: each "
                             "block scores tokens-per-sample minus context-window new tokens; e.g. "
                             f"--context-window {block // 2}")
