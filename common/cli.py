"""``one_line_errors(main)``: the boundary of every console script (setup.py ``entry_points``).

A bad input the user can fix ends as ONE line ``error: ...`` on stderr and exit status 2, with no
traceback: a ``UserInputError`` (its message already names the input and the fix), and the
standard errors of a path the user named -- FileExistsError, FileNotFoundError, IsADirectoryError,
NotADirectoryError, PermissionError, and an OSError of a full or read-only disk (ENOSPC, EDQUOT,
EROFS) -- given their fix here. Any other exception is a bug and keeps Python's traceback.

The wrapped function carries ``ONE_LINE_ERRORS`` (an attribute set to True): a test walks every
console script and checks it is there.
"""
import errno
import functools
import os
import sys
from typing import Callable

from .errors import UserInputError

ONE_LINE_ERRORS = "_longformer_one_line_errors"
EXIT_BAD_INPUT = 2  # argparse's status for a bad command line

# errno -> the fix a user can apply
_DISK_FIXES = {
    errno.ENOSPC: "free space on that disk, or choose an output folder on another disk",
    errno.EDQUOT: "free space within your quota, or choose an output folder on another disk",
    errno.EROFS: "choose an output folder on a writable disk",
    errno.EACCES: "choose a folder you can write to, or fix its permissions",
    errno.EPERM: "choose a folder you can write to, or fix its permissions",
}
_PATH_FIXES = {
    FileExistsError: "choose another path, or remove it first",
    FileNotFoundError: "check the path",
    IsADirectoryError: "give a file, not a folder",
    NotADirectoryError: "a part of the path is a file, not a folder: check the path",
}


def describe(error: OSError) -> str:
    """One line for a path error: its own message when it has no file name (the project's checks
    word theirs with the fix already), else the path, what the system said and the fix."""
    if error.filename is None or error.strerror is None:
        return str(error)
    fix = _DISK_FIXES.get(error.errno) or next(
        (text for kind, text in _PATH_FIXES.items() if isinstance(error, kind)), "check the path")
    path = os.fspath(error.filename)
    return f"{path!r}: {error.strerror}; {fix} (nothing was written)"


def is_path_error(error: BaseException) -> bool:
    """An OSError a user meets on a path they named (not a bug of the tool)."""
    return isinstance(error, (FileExistsError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
                              PermissionError)) or (isinstance(error, OSError) and error.errno in _DISK_FIXES)


def one_line_errors(main: Callable[..., object]) -> Callable[..., object]:
    """``main`` (a console script's entry point) with bad input reported as one line, exit 2."""
    @functools.wraps(main)
    def entry_point(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserInputError as error:
            message = str(error)
        except OSError as error:
            if not is_path_error(error):
                raise
            message = describe(error)
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT

    setattr(entry_point, ONE_LINE_ERRORS, True)
    return entry_point
