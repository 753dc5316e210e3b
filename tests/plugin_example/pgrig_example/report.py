"""The example's report section and conclusion rule, registered on their own."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig import registry
from pgrig.document.model import Row, Section, Table
from pgrig.registry.report import Conclusion, Findings
from pgrig.results import RunRecord, Study, typed
from pgrig_example.workload import COUNTED, ExampleCount


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    rows = []
    for rec in COUNTED.records(records):
        res = typed(rec, ExampleCount)
        if res is not None:
            rows.append(Row((rec.target, f"{res.counted:,}", f"{res.elapsed_ms:.1f}")))
    if not rows:
        return None
    table = Table(("target", "rows counted", "ms"), tuple(rows))
    return Section("Example counts", "example-counts", blocks=(table,))


def counted_all(ev: Findings) -> list[Conclusion]:
    out = []
    for rec in COUNTED.records(ev.records):
        res = typed(rec, ExampleCount)
        if res is not None and res.counted == res.rows:
            text = f"{rec.target}: the example counted all {res.rows:,} rows."
            out.append(Conclusion("example", text, "one count"))
    return out


def register() -> None:
    registry.register_section("example", section)
    registry.register_rule("example", counted_all)
