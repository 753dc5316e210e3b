"""The study index (pgrig.report.index): a report reads its records once into
groups, and each group holds what asking every record gave before (issue 43)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Sequence

import pytest

from pgrig import registry
from pgrig.errors import PgrigError
from pgrig.monitor.model import MONITOR
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index, view
from pgrig.report.pointkey import PointKey, point_key
from pgrig.report.versus import Key, Ledger
from pgrig.results import PgbenchRun, ResultKind, RunRecord
from test_report_answer import stored
from test_report_golden import tiny_cloud


def runs_by_point(
    records: Sequence[RunRecord],
) -> dict[PointKey, dict[str, list[tuple[RunRecord, PgbenchRun | None]]]]:
    """The pgbench runs by point and target, each record asked its kind and
    result, as the report did before its index."""
    out: dict[PointKey, dict[str, list[tuple[RunRecord, PgbenchRun | None]]]] = {}
    for rec in records:
        if PGBENCH_RUN.holds(rec):
            out.setdefault(point_key(rec), {}).setdefault(rec.target, []).append(
                (rec, registry.typed_result(rec))
            )
    return out


def test_the_index_groups_what_each_record_says() -> None:
    _, records = tiny_cloud()
    study = index.of(records)
    assert [r.key for r in study.records] == [r.key for r in records]
    for kind in registry.kinds().values():
        mine = kind.records(records)
        assert [r.key for r in study.kind(kind)] == [r.key for r in mine]
        ok = [(r.key, registry.typed_result(r)) for r in mine if r.status == "ok"]
        assert [(r.key, res) for r, res in study.results.get(kind.name, ())] == ok
    assert {t: [r.key for r in rs] for t, rs in study.of_target.items()} == {
        t: [r.key for r in records if r.target == t] for t in {r.target for r in records}
    }
    by_point = runs_by_point(records)
    assert list(study.points) == list(by_point) and len(study.points) > 1
    for key, per in by_point.items():
        assert {t: [(r.key, run) for r, run in pairs] for t, pairs in per.items()} == {
            t: [(r.key, run) for r, run in pairs] for t, pairs in study.points[key].items()
        }
        assert study.runs[key] == {
            t: [run for _, run in pairs if run is not None] for t, pairs in per.items()
        }
    watched = MONITOR.records(records)
    assert len(study.monitors) == len(watched) > 0
    assert all(k in {r.key for r in PGBENCH_RUN.records(records)} for k in study.monitors)


def test_the_ledger_of_the_index_is_the_ledger_of_the_records() -> None:
    _, records = tiny_cloud()
    targets = sorted({r.target for r in records})
    by_records, by_index = (
        Ledger.of(records, targets[0]),
        Ledger.of_index(index.of(records), targets[0]),
    )
    keys = [Key("tps", point, targets[1]) for point in runs_by_point(records)]
    assert len(by_index) == len(by_records)
    got = [by_index.get(k) for k in keys]
    assert got == [by_records.get(k) for k in keys] and any(c is not None for c in got)


def test_the_reports_own_plugins_are_data_the_registry_reads() -> None:
    """cost and why declare their ``Parts`` (no register() called back from the
    registry): what they declare is what is registered, and a Parts that clashes
    leaves nothing of it behind."""
    from pgrig.report import cost, why

    found = {p.name: p for p in registry.plugins()}
    assert found["cost"].value == "pgrig.report.cost:PARTS"
    assert set(found["cost"].parts) == {
        ("report section", "cost"),
        ("conclusion rule", "latency-target"),
    }
    assert list(registry.sections()).count(cost.section) == 1
    assert list(registry.rules()).count(why.why_rule) == 1
    # its section under a new name, then a rule whose name is why's: refused whole
    clash = registry.Parts(
        sections=(("fresh-section", cost.section),), rules=(("why", cost.goal_rule),)
    )
    with pytest.raises(PgrigError, match="clash-plugin .*registered already"):
        registry.add_plugin(clash, "tests:CLASH", "clash-plugin")
    assert list(registry.sections()).count(cost.section) == 1
    assert list(registry.rules()).count(cost.goal_rule) == 1
    fresh = registry.Parts(sections=(("fresh-section", cost.section),))
    try:
        assert registry.add_plugin(fresh, "tests:FRESH") == (("report section", "fresh-section"),)
        assert list(registry.sections()).count(cost.section) == 2
    finally:
        registry.unregister_section("fresh-section", cost.section)


@pytest.mark.parametrize(
    "name",
    [
        "tiny_cloud",
        "quick",
        "versions",
        "tpcc_settings",
        "tpcc_rates",
        "custom_login",
        "backup_two",
    ],
)
def test_no_section_asks_a_record_its_kind_or_decodes_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every section reads the study's index: a whole report asks no record its
    kind (``ResultKind.holds``, ``records``) and decodes each in one place, the
    index (the readers of one run's samples or -P points hand back its value)."""
    study, records = tiny_cloud() if name == "tiny_cloud" else stored(name)
    asked: list[str] = []

    def holds(self: ResultKind, record: RunRecord) -> bool:
        asked.append(f"{self.name}.holds from {sys._getframe(1).f_code.co_qualname}")
        return record.kind == self.name

    def of_kind(self: ResultKind, records: Iterable[RunRecord]) -> list[RunRecord]:
        asked.append(f"{self.name}.records from {sys._getframe(1).f_code.co_qualname}")
        return [r for r in records if r.kind == self.name]

    decoding: Counter[str] = Counter()
    typed_result = registry.typed_result

    def counted(record: RunRecord) -> object:
        caller = sys._getframe(1).f_code
        decoding[f"{caller.co_filename.rsplit('/', 1)[-1]}:{caller.co_qualname}"] += 1
        return typed_result(record)

    monkeypatch.setattr(ResultKind, "holds", holds)
    monkeypatch.setattr(ResultKind, "records", of_kind)
    monkeypatch.setattr(registry, "typed_result", counted)
    built = view.build(study, records)
    assert built.sections and not asked, asked
    # index.of decodes through registry.decoded, once per record, then reads the values
    index_of = {"__init__.py:decoded", "index.py:of"}
    readers = {"samples.py:own_samples", "progress.py:own_progress"}
    assert set(decoding) <= index_of | readers, decoding
    assert decoding["__init__.py:decoded"] == len(records)
