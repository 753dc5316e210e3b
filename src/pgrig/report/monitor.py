"""Report section: what the host and the server did during each run, and the bottleneck verdict."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.report.model import Section
from pgrig.results import RunRecord, Study


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    """None until there are records of this kind."""
    return None
