"""Every figure in the docs is read from its results page: a check of README.md, recipes/README.md
and docs/*.md (the topic pages; docs/results/ is written by commands and checked by
``results_pages``).

    python -m longformer_tools.report.figure_check     # list the unbacked figures (exit 1 if any)

A figure is a number with a unit (``3.2 ms``, ``14x``, ``1.04-1.08x``, ``66%``, ``25 MB``,
``8,782 tokens/s``, ``F1 71.2``, ...). It is backed when it is

- inside a generated block ``<!-- figure: PAGE KEY -->text<!-- /figure -->``, whose text
  ``doc_figures`` renders from the page's stored data (``results_pages --write`` fills it, the
  test checks it is current);
- in a sentence (a table row counts as one) that names its page and the commit it was measured
  on: "... (docs/results/X.md, commit abc1234)"; the page must exist;
- or in a phrase on the reviewed allowlist of definitions (``figure_allowlist.ALLOWED``: flag
  values, the paper's settings, arithmetic), each with its reason.
"""
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Sequence

from longformer_common.provenance import REPO

from .figure_allowlist import ALLOWED

NUMBER = r"\d[\d,]*(?:\.\d+)?"
RANGE = rf"{NUMBER}(?:\s?(?:-|–|to)\s?{NUMBER})?"
# a unit after the number: "x" and "%" written against it, the others after an optional space
SUFFIX = (r"(?:x|×|%|\s?(?:ns|µs|us|ms|s|sec|seconds?|min|minutes?|hours?|MB|GB|KB|MiB|GiB|KiB|tokens/s|"
          r"TFLOP/s|GFLOP/s|BPC|F1))(?![\w/])")
FIGURE = re.compile(rf"(?<![\w.\-/]){RANGE}{SUFFIX}|(?<![\w])(?:F1|BPC)(?: of|:)? {NUMBER}(?![\w])")
BLOCK = re.compile(r"<!-- figure: (\S+) (\S+) -->(.*?)<!-- /figure -->", re.S)
PAGE = re.compile(r"results/([\w.\-]+\.md)")
COMMIT = re.compile(r"\bcommits? [0-9a-f]{7,40}\b")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[*`])")


@dataclass(frozen=True)
class Unbacked:
    path: str  # relative to the repository root
    line: int
    figure: str
    sentence: str

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}: '{self.figure}' is neither in a generated block, nor in a sentence "
                f"naming its docs/results page and commit, nor allowlisted: {self.sentence[:120]}")


def doc_files(root: Path = REPO) -> List[Path]:
    """The pages the check reads: README.md, recipes/README.md and docs/*.md."""
    return [root / "README.md", root / "recipes" / "README.md"] + sorted((root / "docs").glob("*.md"))


def _units(text: str) -> Iterator[tuple]:
    """(offset, text) of each sentence of ``text``: paragraphs split at sentence ends, a table
    row, a list item and a fenced code block line each its own."""
    offset = 0
    for paragraph in re.split(r"(\n\s*\n|\n(?=\s*[|\-*]|\s*\d+\. )|\n(?=```))", text):
        start = 0
        for match in SENTENCE_END.finditer(paragraph):
            yield offset + start, paragraph[start:match.start()]
            start = match.end()
        yield offset + start, paragraph[start:]
        offset += len(paragraph)


def backed_by_page(sentence: str, results: Path) -> bool:
    """Whether ``sentence`` names an existing docs/results page and a commit."""
    return bool(COMMIT.search(sentence)) and any((results / name).exists() for name in PAGE.findall(sentence))


def allowlisted(figure: str, sentence: str, allowed: Sequence[str] = tuple(ALLOWED)) -> bool:
    """Whether an allowlist phrase containing ``figure`` is in ``sentence`` (whitespace collapsed)."""
    flat = " ".join(sentence.split())
    return any(figure in phrase and phrase in flat for phrase in allowed)


def unbacked(path: Path, root: Path = REPO) -> List[Unbacked]:
    """The figures of ``path`` that nothing backs (see the module's docstring)."""
    text = path.read_text()
    # a generated block's text is checked against its renderer, not here: blank it, keeping offsets
    text = BLOCK.sub(lambda m: " " * len(m.group(0)), text)
    found = []
    for offset, sentence in _units(text):
        for match in FIGURE.finditer(sentence):
            figure = match.group(0)
            if allowlisted(figure.strip(), sentence) or backed_by_page(sentence, root / "docs" / "results"):
                continue
            line = text.count("\n", 0, offset + match.start()) + 1
            found.append(Unbacked(str(path.relative_to(root)), line, figure.strip(), " ".join(sentence.split())))
    return found


def check(root: Path = REPO) -> List[Unbacked]:
    return [problem for path in doc_files(root) if path.exists() for problem in unbacked(path, root)]


def main(argv=None) -> int:
    problems = check()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
