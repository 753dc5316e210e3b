"""How a run that produced no result shows in a table: its status and reason."""

from __future__ import annotations

from pgrig.document.model import FAILED, SKIPPED, Row
from pgrig.results import RunRecord


def status_text(rec: RunRecord) -> str:
    """'failed: reason' / 'skipped: reason' for a run that did not produce a result."""
    reason = rec.reason or "no reason recorded"
    if rec.status == "ok":
        return "ok, but the result could not be read"
    return f"{rec.status}: {reason}"


def status_kind(rec: RunRecord) -> str:
    return SKIPPED if rec.status == "skipped" else FAILED


def status_row(label: str, rec: RunRecord, width: int) -> Row:
    """A row for a run with no result: its reason in the first value column."""
    cells = (label, status_text(rec)) + ("",) * (width - 2)
    return Row(cells[:width], status_kind(rec))
