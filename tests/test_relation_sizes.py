"""Table and index sizes (seeds 000/004's \\dt+ and \\di+): read from a real
cluster, and shown after the load and after the runs, targets side by side."""

from __future__ import annotations

from pathlib import Path

from pgrig.clients import OneHost
from pgrig.conninfo import Conn
from pgrig.pgsource.binaries import PgBinaries
from pgrig.report import sizes
from pgrig.results import RelationSize, RelationSizes, RunRecord, to_dict
from pgrig.step import Context
from pgrig.ui import Ui
from pgrig.workloads.common import relation_sizes


def _read(bins: PgBinaries, conn: Conn, tmp_path: Path, when: str) -> tuple[RelationSizes, str]:
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=tmp_path,
        scratch=tmp_path,
        conn=conn,
    )
    with Ui(quiet=True).step("sizes") as line:
        result, raw = relation_sizes(when)(ctx, line)
    assert isinstance(result, RelationSizes)
    return result, raw


def test_sizes_of_tables_and_indexes_grow_with_the_data(
    bins: PgBinaries, conn: Conn, tmp_path: Path
) -> None:
    with conn.connect() as db:
        db.execute("DROP TABLE IF EXISTS sized, pgrig_marker")
        db.execute("CREATE TABLE sized (id int PRIMARY KEY, pad text)")
        db.execute("CREATE TABLE pgrig_marker (x int)")  # pgrig's own tables are left out
        db.execute("INSERT INTO sized SELECT g, repeat('x', 100) FROM generate_series(1, 1000) g")
        db.commit()
    before, raw = _read(bins, conn, tmp_path, "after load")
    with conn.connect() as db:
        db.execute("UPDATE sized SET pad = pad || 'y'")  # every row gets a new version
        db.commit()
    after, _ = _read(bins, conn, tmp_path, "after runs")
    by_name = {r.name: r for r in before.relations}
    assert by_name["sized"].kind == "table" and by_name["sized"].bytes >= 100_000
    assert by_name["sized_pkey"] == RelationSize(
        "sized_pkey", "index", by_name["sized_pkey"].bytes, "sized"
    )
    assert "pgrig_marker" not in by_name and "sized_pkey" in raw
    grown = {r.name: r.bytes for r in after.relations}
    assert grown["sized"] > by_name["sized"].bytes
    assert before.database_bytes >= before.total("table") + before.total("index")
    with conn.connect() as db:
        db.execute("DROP TABLE sized, pgrig_marker")
        db.commit()


def _record(target: str, when: str, table: int, index: int) -> RunRecord:
    result = RelationSizes(
        when,
        (RelationSize("pgbench_accounts", "table", table),
         RelationSize("pgbench_accounts_pkey", "index", index, "pgbench_accounts")),
        database_bytes=table + index + 8_000_000,
    )  # fmt: skip
    return RunRecord("s", f"{target}/tpcb/s1/sizes/{when}", "relation_sizes", target,
                     {"workload": "tpcb", "scale": 1, "when": when}, "ok", "", "",
                     to_dict(result))  # fmt: skip


def test_targets_side_by_side_with_growth() -> None:
    mib = 2**20
    records = [
        _record("a", "after load", 13 * mib, 2 * mib),
        _record("b", "after load", 13 * mib, 2 * mib),
        _record("a", "after runs", 26 * mib, 2 * mib),
        RunRecord("s", "b/tpcb/s1/sizes/after-runs", "relation_sizes", "b",
                  {"workload": "tpcb", "scale": 1}, "failed", "", "", reason="timeout"),
    ]  # fmt: skip
    section = sizes.section(records)
    assert section is not None
    (table,) = section.blocks
    assert table.columns[2:] == ("a: after load", "a: after runs", "b: after load", "b: after runs")  # type: ignore[union-attr]
    rows = {r.cells[0]: r.cells for r in table.rows}  # type: ignore[union-attr]
    assert rows["pgbench_accounts"][2:] == ("13.0 MiB", "26.0 MiB (+100%)", "13.0 MiB", "-")
    assert rows["pgbench_accounts_pkey (on pgbench_accounts)"][3] == "2.0 MiB (+0%)"
    (alone,) = sizes.section(records[:3:2]).blocks  # type: ignore[union-attr]
    assert alone.columns[2:] == ("After load", "After runs", "Growth")  # type: ignore[union-attr]
    assert "timeout" in section.paragraphs[-1]
    assert sizes.section(records[:1]) is not None and sizes.section([]) is None
