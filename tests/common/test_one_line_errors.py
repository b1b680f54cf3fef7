"""longformer_common.cli.one_line_errors: the boundary of every console script. A bad input
(UserInputError, an error of a path the user named, a full or read-only disk) is one line
``error: ...`` and exit 2; anything else (a bug) keeps its traceback. Every console script of
setup.py carries it."""
import errno
import importlib
import re

import pytest

from longformer_common.cli import ONE_LINE_ERRORS, one_line_errors
from longformer_common.errors import UserInputError
from tests.conftest import REPO


def console_scripts() -> dict:
    return dict(re.findall(r'"([\w-]+) = ([\w.]+:\w+)"', (REPO / "setup.py").read_text()))


def test_every_console_script_carries_the_wrapper():
    scripts = console_scripts()
    assert len(scripts) >= 19  # the regex found setup.py's entry points
    unwrapped = []
    for name, target in scripts.items():
        module, function = target.split(":")
        if not getattr(getattr(importlib.import_module(module), function), ONE_LINE_ERRORS, False):
            unwrapped.append(name)
    assert not unwrapped, f"console scripts without one_line_errors: {unwrapped}"


def test_plugin_reexports_the_same_class():
    import fairseq_longformer

    assert fairseq_longformer.UserInputError is UserInputError
    assert issubclass(UserInputError, ValueError)
    from hydra.errors import CompactHydraException  # fairseq-hydra-train prints it without its stack

    assert issubclass(UserInputError, CompactHydraException)


def _raising(error):
    @one_line_errors
    def main(argv=None):
        raise error
    return main


@pytest.mark.parametrize("error, expected", [
    (UserInputError("--x 3 is too big: pass at most 2"), "error: --x 3 is too big: pass at most 2"),
    (FileExistsError("output folder 'o' exists and is not empty (pass --overwrite to replace it)"),
     "error: output folder 'o' exists and is not empty (pass --overwrite to replace it)"),
    (PermissionError(errno.EACCES, "Permission denied", "locked/out"),
     "error: 'locked/out': Permission denied; choose a folder you can write to, or fix its permissions "
     "(nothing was written)"),
    (OSError(errno.ENOSPC, "No space left on device", "out"),
     "error: 'out': No space left on device; free space on that disk, or choose an output folder on another "
     "disk (nothing was written)"),
    (OSError(errno.EROFS, "Read-only file system", "ro/out"),
     "error: 'ro/out': Read-only file system; choose an output folder on a writable disk (nothing was written)"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "nowhere"),
     "error: 'nowhere': No such file or directory; check the path (nothing was written)"),
])
def test_bad_input_is_one_line_and_exit_2(error, expected, capsys):
    assert _raising(error)() == 2
    err = capsys.readouterr().err
    assert err == expected + "\n"


@pytest.mark.parametrize("error", [KeyError("bug"), OSError(errno.EIO, "Input/output error"), ValueError("bug")])
def test_a_bug_keeps_its_traceback(error):
    with pytest.raises(type(error)):
        _raising(error)()


def test_result_and_arguments_pass_through():
    @one_line_errors
    def main(argv=None, extra=1):
        return len(argv) + extra

    assert main(["a", "b"], extra=3) == 5 and main.__name__ == "main"
