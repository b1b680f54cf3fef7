"""Every figure (a number with a unit) in README.md, recipes/README.md and docs/*.md is read from
its docs/results page: in a generated block that is current, in a sentence naming its page and
commit, or on the reviewed allowlist (longformer_tools.report.figure_check)."""
import shutil
from pathlib import Path

import pytest

from longformer_tools.report import doc_figures, figure_check
from longformer_tools.report.figure_allowlist import ALLOWED

REPO = Path(__file__).resolve().parents[1]


def test_the_docs_state_no_unbacked_figure():
    problems = figure_check.check(REPO)
    assert not problems, "\n".join(map(str, problems)) + (
        "\nrender the figure from docs/results/ (a generated block), name its page and commit in the "
        "sentence, or remove it")


def test_every_generated_block_is_known_and_current():
    assert not doc_figures.unknown_blocks(REPO)
    stale = doc_figures.stale_docs(REPO)
    assert not stale, f"run `python -m longformer_tools.report.results_pages --write`: {stale}"


def test_every_allowlist_entry_has_a_reason_and_holds_a_figure():
    for phrase, reason in ALLOWED.items():
        assert reason.strip() and figure_check.FIGURE.search(phrase), phrase


@pytest.fixture
def copy_of_install_doc(tmp_path):
    """A repository-shaped folder holding a copy of docs/install.md and one results page."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    shutil.copy(REPO / "docs" / "install.md", tmp_path / "docs" / "install.md")
    (tmp_path / "docs" / "results" / "figure1_cpu.md").write_text("# a page\n")
    return tmp_path / "docs" / "install.md"


def test_a_pasted_figure_fails(copy_of_install_doc):
    root = copy_of_install_doc.parents[1]
    assert figure_check.check(root) == []  # the copy passes as committed
    copy_of_install_doc.write_text(copy_of_install_doc.read_text() + "\nThe attention takes 12.5 ms at 4,096 tokens.\n")
    problems = figure_check.check(root)
    assert [p.figure for p in problems] == ["12.5 ms"]
    assert problems[0].path == "docs/install.md" and "12.5 ms" in str(problems[0])


@pytest.mark.parametrize("text", ["It ran 1.04-1.08x as fast.", "Flex was 14x slower.", "it saves 66% of memory",
                                  "about 5-10% slower", "8,782 tokens/s", "F1 71.2", "138 TFLOP/s", "25 MB"])
def test_each_kind_of_figure_is_found(copy_of_install_doc, text):
    copy_of_install_doc.write_text(text + "\n")
    assert len(figure_check.check(copy_of_install_doc.parents[1])) == 1


@pytest.mark.parametrize("text", [
    "It takes 12.5 ms (docs/results/figure1_cpu.md, commit abc1234).",  # names its page and commit
    "Warmup takes 10% of updates.",  # an allowlisted setting
    "Ours is <!-- figure: gpu_h200.md flex_band_verdict -->1.5x faster<!-- /figure --> there.",  # a block
    "A window of w = 256 tokens, fp16 and sm_80.",  # no unit
])
def test_backed_figures_pass(copy_of_install_doc, text):
    copy_of_install_doc.write_text(text + "\n")
    assert figure_check.check(copy_of_install_doc.parents[1]) == []


@pytest.mark.parametrize("text", [
    "It takes 12.5 ms (docs/results/figure1_cpu.md).",  # no commit
    "It takes 12.5 ms (docs/results/missing_page.md, commit abc1234).",  # no such page
    "Flex took 10% longer.",  # a setting's number, not its phrase
])
def test_half_backed_figures_fail(copy_of_install_doc, text):
    copy_of_install_doc.write_text(text + "\n")
    assert len(figure_check.check(copy_of_install_doc.parents[1])) == 1


def test_a_hand_edited_block_is_not_current(tmp_path, monkeypatch):
    doc = tmp_path / "README.md"
    doc.write_text("Ours is <!-- figure: gpu_h200.md flex_band_verdict -->much faster<!-- /figure -->.\n")
    monkeypatch.setattr(doc_figures, "doc_files", lambda root: [doc])
    assert doc_figures.stale_docs(tmp_path) == [doc]
    doc_figures.stale_docs(tmp_path, write=True)
    assert doc_figures.FIGURES[("gpu_h200.md", "flex_band_verdict")]() in doc.read_text()
    assert doc_figures.stale_docs(tmp_path) == []
