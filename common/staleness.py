"""Whether a stored figure is older than the code it measures, and the banner a page then opens with.

A page records the commit its numbers were measured on (``provenance``); the renderer asks git
whether any later commit touched the code the page measures (``code``: git pathspecs, exclusions
included) and, if one did, the page says so at its top. The banner names only the measured
commit and the code, never a count or the latest commit, so it changes once (when the page first
becomes stale) and the re-render test then asks for that re-render.
"""
import shlex
from typing import Optional, Sequence

from .provenance import _git

# what a CPU measurement of the models runs (git pathspecs): the attention core without its
# GPU-only files (Triton, GPU tooling: a CPU run never executes them), the plugin's modules and models
CPU_MODEL_CODE = ("kernels", ":(exclude)kernels/triton_*", ":(exclude)kernels/gpu_*",
                  ":(exclude)kernels/compile_table.py", "fairseq_longformer/modules", "fairseq_longformer/models")


def changed_since(commit: Optional[str], code: Sequence[str]) -> Optional[bool]:
    """Whether a commit after ``commit`` (up to HEAD) touched ``code``; None when git cannot say
    (no commit recorded, not a checkout, the commit not in this history)."""
    if not commit:
        return None
    count = _git("rev-list", "--count", f"{commit}..HEAD", "--", *code)
    return None if count is None else int(count) > 0


def stale_banner(commit: Optional[str], code: Sequence[str]) -> str:
    """"> Older than the code: ..." when ``code`` changed after ``commit``; "" when it did not,
    or git cannot tell (``changed_since`` None)."""
    if not changed_since(commit, code):
        return ""
    named = ", ".join(f"`{path}`" for path in code if not path.startswith(":("))
    return (f"> **Older than the code**: measured on commit {commit[:7]}; the code it measures ({named}) has "
            f"changed since (`git log {commit[:7]}..HEAD -- {' '.join(shlex.quote(c) for c in code)}`), so these numbers "
            "describe that commit's code, not this checkout's. Measure again to update them.")
