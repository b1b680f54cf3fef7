"""``UserInputError``: the error of a bad input the user can fix; its message is one line naming
the input and the fix. Every package raises it (``fairseq_longformer.UserInputError`` is this
class), and every console script's ``main`` reports it as that one line
(``longformer_common.cli.one_line_errors``).

It is a ValueError (the project's rule: bad input raises ValueError). Under fairseq-hydra-train,
hydra prints a ``CompactHydraException`` as its message alone, without the stack; hydra is
imported only when it is installed (it comes with fairseq), so this package still needs nothing
but the standard library.
"""
try:  # fairseq-hydra-train reports a job's error through hydra, which prints a compact one as is
    from hydra.errors import CompactHydraException as _ReportedAsOneLine
except ImportError:  # hydra is fairseq's: absent where only the bottom packages are installed
    _ReportedAsOneLine = Exception


class UserInputError(ValueError, _ReportedAsOneLine):
    """A bad input the user can fix; its message is one line naming the input and the fix (also
    under fairseq-hydra-train, whose hydra prints a ``CompactHydraException`` without its stack)."""
