"""Table and index sizes after the load and after the runs (seeds 000 and 004
show ``\\dt+`` and ``\\di+``): how big the data is, and how much the runs grew
or bloated it; targets side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pgrig.document import fmt
from pgrig.document.model import HEADLINE, Row, Section, Table
from pgrig.registry.shared import RELATION_SIZES
from pgrig.report import index
from pgrig.results import RelationSizes, RunRecord

MOMENTS = ("after load", "after runs")


def _growth(before: int | None, after: int | None) -> str:
    if not before or after is None:
        return "-"
    return f"{(after - before) / before * 100:+.0f}%"


def _group_title(params: dict[str, object]) -> str:
    scale = params.get("scale")
    return str(params.get("workload", "")) + (f", scale {scale}" if scale is not None else "")


def section(records: Sequence[RunRecord]) -> Section | None:
    """One table per workload (and scale): every relation, after the load and
    after the runs, per target."""
    study = index.read(records)
    mine = study.kind(RELATION_SIZES)
    if not mine:
        return None
    groups: dict[str, dict[tuple[str, str], RelationSizes]] = {}
    failed: list[str] = []
    targets: list[str] = []
    for rec in mine:
        if rec.target not in targets:
            targets.append(rec.target)
        result = study.result(rec, RelationSizes)
        if result is None:
            failed.append(f"{rec.key}: {rec.status}" + (f" ({rec.reason})" if rec.reason else ""))
            continue
        groups.setdefault(_group_title(rec.params), {})[(rec.target, result.when)] = result
    blocks = [_table(title, got, targets) for title, got in groups.items()]
    paragraphs: tuple[str, ...] = (
        "pg_table_size of each table and index (with its TOAST table and its free space and "
        "visibility maps), as psql's \\dt+ and \\di+ show it, taken after the load (and its "
        "counts) and once more after the target's last run; growth = after runs / after load.",
    )
    if failed:
        paragraphs += ("Not measured: " + "; ".join(failed) + ".",)
    return Section("Table and index sizes", "relation-sizes", paragraphs, tuple(blocks))


def _table(title: str, got: dict[tuple[str, str], RelationSizes], targets: list[str]) -> Table:
    shown = [t for t in targets if any((t, m) in got for m in MOMENTS)]
    relations: dict[str, tuple[str, str | None]] = {}  # name -> (kind, table), largest first
    for t in shown:
        for moment in MOMENTS:
            for rel in got[(t, moment)].relations if (t, moment) in got else ():
                relations.setdefault(rel.name, (rel.kind, rel.table))

    def pair(t: str, value: Callable[[RelationSizes], int | None]) -> tuple[int | None, ...]:
        return tuple(value(got[(t, m)]) if (t, m) in got else None for m in MOMENTS)

    one = len(shown) == 1

    def cells(of: Callable[[RelationSizes], int | None]) -> tuple[str, ...]:
        out: list[str] = []
        for t in shown:
            before, after = pair(t, of)
            load = fmt.size(before) if before is not None else "-"
            runs = fmt.size(after) if after is not None else "-"
            growth = _growth(before, after)
            # several targets: the growth inside the cell keeps the table narrow
            grown = f"{runs} ({growth})" if growth != "-" else runs
            out += [load, runs, growth] if one else [load, grown]
        return tuple(out)

    def relation(name: str) -> Callable[[RelationSizes], int | None]:
        return lambda r: next((x.bytes for x in r.relations if x.name == name), None)

    def total(kind: str) -> Callable[[RelationSizes], int | None]:
        return lambda r: r.total(kind)

    rows = []
    for name, (kind, table) in relations.items():
        # only an index names its table (relation_sizes.sql)
        label = f"{name} (on {table})" if table else name
        rows.append(Row((label, kind, *cells(relation(name)))))
    rows.append(Row(("all tables", "", *cells(total("table"))), HEADLINE))
    rows.append(Row(("all indexes", "", *cells(total("index"))), HEADLINE))
    rows.append(Row(("database", "", *cells(lambda r: r.database_bytes)), HEADLINE))
    if one:
        columns: tuple[str, ...] = ("After load", "After runs", "Growth")
    else:
        columns = tuple(f"{t}: {c}" for t in shown for c in ("after load", "after runs"))
    return Table(
        ("Relation", "Kind", *columns),
        tuple(rows),
        caption=f"Sizes of {title}" + (f" on {shown[0]}" if one else ""),
        numeric=(False, False, *(True for _ in columns)),
    )
