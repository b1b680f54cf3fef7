"""Every page under docs/results/ is what its command renders from the data stored beside it:
a page edited by hand, data changed without its page, or a page without a command fails here."""
import json
from pathlib import Path

import pytest

from longformer_tools.report import results_pages

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def test_every_page_has_a_renderer_or_says_it_has_none():
    pages = {path.name for path in RESULTS.glob("*.md")}
    known = set(results_pages.RENDERERS) | set(results_pages.UNRENDERED)
    assert pages <= known, f"pages without a renderer: {sorted(pages - known)}"
    missing = known - pages - set(results_pages.FIRST_WRITTEN_BY_REGENERATE)
    assert not missing, f"renderers without a page: {sorted(missing)}"
    for page in results_pages.UNRENDERED:
        text = (RESULTS / page).read_text()
        assert results_pages.UNRENDERED_MARK in text and "commit" in text[:600], page


@pytest.mark.parametrize("page", results_pages.pages())
def test_committed_page_is_rendered_from_its_data(page):
    rendered = results_pages.render(page)
    assert rendered == (RESULTS / page).read_text(), (
        f"docs/results/{page} differs from what its data renders: run "
        "`python -m longformer_tools.report.results_pages --write` (or its command) and commit both")


def test_every_rendered_page_names_where_it_was_measured():
    """The commit (and for benchmarks the machine and date) of each page's numbers; the GPU page
    names the commits of its leases and that they are older than main's kernels."""
    for page in results_pages.pages():
        text = (RESULTS / page).read_text()
        if page == "gpu_h200.md":
            assert "older than main's" in text
        elif page != "triton_compile.md":  # compiled from the current sources: no measurement
            assert "Measured on commit " in text, page


def test_a_drifted_page_is_found(tmp_path, monkeypatch):
    """The check itself fails on a page whose text no longer matches its data."""
    monkeypatch.setattr(results_pages, "REPO", tmp_path)
    (tmp_path / "docs" / "results").mkdir(parents=True)
    page = "charlm_ablation_relative.md"
    value = json.loads((RESULTS / "charlm_ablation_relative.json").read_text())["table"]["fixed"]["values"][0]
    text = (RESULTS / page).read_text()
    assert f"{value:.4f}" in text  # one seed's bits per character, as the page prints it
    (tmp_path / "docs" / "results" / page).write_text(text.replace(f"{value:.4f}", f"{value + 0.01:.4f}"))
    (tmp_path / "docs" / "results" / "charlm_ablation_relative.json").write_text(
        (RESULTS / "charlm_ablation_relative.json").read_text())
    monkeypatch.setattr(results_pages, "RENDERERS", {page: results_pages.RENDERERS[page]})
    assert results_pages.main([]) == 1
