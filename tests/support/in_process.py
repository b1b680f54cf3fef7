"""fairseq-train in the test's own process: no interpreter start, no second import of fairseq
(each costs ~5 s), the same code path as the console script."""
import contextlib
import io
import sys
from typing import List, Tuple


def run_fairseq_in_process(command: str, argv: List[str]) -> Tuple[int, str]:
    """``fairseq_cli.train.cli_main`` as the ``command`` console script runs it: sys.argv set, an
    uncaught error handed to ``sys.excepthook`` (the plugin's prints a UserInputError as one
    line, anything else as Python's traceback). Returns (exit code, stderr)."""
    from fairseq_cli.train import cli_main

    err, saved = io.StringIO(), sys.argv
    sys.argv = [command, *argv]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main()
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        finally:
            sys.argv = saved
    return code, err.getvalue()
