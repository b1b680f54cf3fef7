"""longformer_common.staleness: a page older than the code it measures says so, from git."""
from longformer_common.provenance import _git
from longformer_common.staleness import CPU_MODEL_CODE, changed_since, stale_banner


def test_the_current_commit_is_not_stale():
    head = _git("rev-parse", "--short=12", "HEAD")
    assert changed_since(head, CPU_MODEL_CODE) is False
    assert stale_banner(head, CPU_MODEL_CODE) == ""


def test_a_commit_before_a_change_to_the_code_is_stale():
    last = _git("log", "-1", "--format=%H", "--", "kernels/reference.py")  # the last change to one file
    before = _git("rev-parse", "--short", f"{last}~1")
    assert changed_since(before, ("kernels/reference.py",)) is True
    banner = stale_banner(before, ("kernels/reference.py",))
    assert banner.startswith("> **Older than the code**") and before[:7] in banner and "`kernels/reference.py`" in banner
    assert changed_since(last, ("kernels/reference.py",)) is False


def test_unknown_commits_say_nothing():
    assert changed_since(None, CPU_MODEL_CODE) is None
    assert changed_since("0000000", CPU_MODEL_CODE) is None
    assert stale_banner("0000000", CPU_MODEL_CODE) == ""
