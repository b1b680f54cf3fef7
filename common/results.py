"""Writing a results page: ``docs/results/NAME.json`` (the run's record, with where and when it was
measured) and ``docs/results/NAME.md`` (the page rendered from that record), both at once.

Every experiment and benchmark that stores a page goes through ``write_page``, so each record
carries ``provenance()`` (commit, CPU model, cores, date, load average) taken on the machine that
measured it, and each page renders that stored record (``provenance_line``), never the machine
that renders it again.
"""
import json
from pathlib import Path
from typing import Optional, Tuple

from .atomic import atomic_files
from .provenance import REPO, provenance

RESULTS = REPO / "docs" / "results"


def stamped(record: dict) -> dict:
    """``record`` with ``"provenance": provenance()`` of this machine, now, unless it has one
    already (a record rendered again keeps the machine it was measured on)."""
    return record if record.get("provenance") else {**record, "provenance": provenance()}


def write_page(name: str, record: dict, markdown: str, folder: Optional[Path] = None) -> Tuple[Path, Path]:
    """Write ``folder/NAME.json`` (``record``, indent 2) and ``folder/NAME.md`` (``markdown``) so
    that no reader sees half of either; ``folder`` defaults to docs/results (created if missing).
    The record must already hold its provenance (``stamped``): the page was rendered from it.
    Returns the two paths."""
    if not record.get("provenance"):
        raise ValueError(f"write_page({name!r}): the record has no provenance; stamp it before rendering its page")
    folder = Path(folder) if folder is not None else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"{name}.json", f"{name}.md"]
    with atomic_files(folder, names) as temps:
        temps[names[0]].write_text(json.dumps(record, indent=2) + "\n")
        temps[names[1]].write_text(markdown)
    return folder / names[0], folder / names[1]
