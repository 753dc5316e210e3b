"""Report views issue 20 asked for: TPC-C across targets, per-statement latency
side by side, the lab-targets table with every target, and seed 001's defects.
Records are built from typed results (the report reads nothing else)."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from pgrig import export, registry, results
from pgrig.document.model import Section, Table
from pgrig.meaning import meaning_of
from pgrig.registry.report import Runs
from pgrig.report import compare, view
from pgrig.report import writer as report
from pgrig.results import (
    FsyncResult,
    FsyncRow,
    PgbenchInit,
    PgbenchRun,
    ProgressPoint,
    RelationSize,
    RelationSizes,
    RunRecord,
    SetupResult,
    StatementLatency,
    Study,
    from_dict,
    to_dict,
)
from pgrig.storage.model import LabInfo
from pgrig.workloads.tpcc.model import TpccLoad, TpccRun, TpmPoint, TxnStats
from pgrig.workloads.tpcc.report import load_table, summary_table, tpmc_figure
from test_report_golden import tiny_cloud


def rec(target: str, key: str, kind: str, result: object, **params: object) -> RunRecord:
    return RunRecord(
        study="s",
        key=f"{target}/{key}",
        kind=kind,
        target=target,
        params=params,
        status="ok",
        started_at="2026-11-25T00:00:00+00:00",
        finished_at="2026-11-25T00:00:10+00:00",
        result=to_dict(result),
    )


def study(targets: list[str], target: str = "/var/tmp") -> Study:
    return Study(
        id="s",
        name="s",
        target=target,
        started_at="2026-11-25T00:00:00+00:00",
        status="finished",
        params={"targets": [{"name": t} for t in targets]},
    )


def tables(sections: tuple[Section, ...]) -> list[Table]:
    return [b for s in sections for b in s.blocks if isinstance(b, Table)]


# -- TPC-C across targets --------------------------------------------------------


def tpcc_run(tpmc: float) -> TpccRun:
    # New-Order's p99 falls as tpmC rises: 6,000 -> 12 ms, 7,000 -> 18 ms (xfs's 1.5x)
    p99 = {6000.0: 11.0, 6100.0: 13.0, 7000.0: 17.0, 7100.0: 19.0}.get(tpmc, 20.0)
    no = TxnStats("new_order", 45, 450, 0, 0, p50_ms=3.0, p95_ms=p99 - 3.0, p99_ms=p99)
    return TpccRun(
        mode="server", warehouses=2, active=1, connections=2, threads=1, duration_s=10.0,
        isolation="repeatable read", transactions=1000, failed=0, retried=0, retries=0,
        serialization_failures=0, deadlock_failures=0, tpmc=tpmc, tpm_total=tpmc * 2.2,
        tps=tpmc * 2.2 / 60, rollbacks=1, latency_avg_ms=4.0, types=(no,),
    )  # fmt: skip


def tpcc_load(size: int) -> TpccLoad:
    return TpccLoad(warehouses=2, jobs=2, rows=1_000_000, database_bytes=size, elapsed_s=10.0,
                    rows_per_s=1e5, mb_per_s=size / 1e7)  # fmt: skip


def tpcc_records() -> list[RunRecord]:
    out = []
    for target, size, tpmc in (
        ("ext4", 200 << 20, [6000.0, 6100.0]),
        ("xfs", 300 << 20, [7000.0, 7100.0]),
    ):
        out.append(rec(target, "tpcc/load", "tpcc_load", tpcc_load(size), workload="tpcc"))
        for i, value in enumerate(tpmc, 1):
            out.append(
                rec(
                    target,
                    f"tpcc/run/r{i}",
                    "tpcc_run",
                    tpcc_run(value),
                    workload="tpcc",
                    mode="server",
                    repeat=i,
                )
            )
    return out


def test_tpcc_summary_has_a_target_column_and_each_targets_own_size() -> None:
    table = summary_table(study(["ext4", "xfs"]), tpcc_records())
    assert table is not None and table.columns[:2] == ("run", "target")
    sizes = {row.cells[1]: row.cells[3] for row in table.rows}
    assert sizes == {"ext4": "200.0 MiB (100.0 MiB)", "xfs": "300.0 MiB (150.0 MiB)"}


def with_settings(s: Study, settings: dict[str, dict[str, str]]) -> Study:
    """``s`` with each target's server reporting ``settings`` (the stored tiny-cloud
    study's environment, its PostgreSQL settings replaced)."""
    env = next(iter(tiny_cloud()[0].target_environments.values()))
    assert env.postgres is not None
    machines = {
        t: replace(env, postgres=replace(env.postgres, settings=values))
        for t, values in settings.items()
    }
    return replace(s, target_environments=machines)


def test_tpcc_summary_gives_a_median_per_target_in_the_campaign_order_with_its_flags() -> None:
    """The issue's study: the summary in execution order, every cell bold, no
    median per target, no flag at the synchronous_commit=off target's tpmC."""
    records = tpcc_records()
    records = records[3:] + records[:3]  # xfs ran first
    s = with_settings(study(["ext4", "xfs"]), {"ext4": {}, "xfs": {"synchronous_commit": "off"}})
    table = summary_table(s, records)
    assert table is not None
    assert [r.cells[1] for r in table.rows] == ["ext4", "xfs"]  # the campaign's order
    assert not any(r.kind for r in table.rows)  # not every cell a headline
    ext4, xfs = (r.cells for r in table.rows)
    assert ext4[4].startswith("6,050 (n=2, range 6,000–6,100)") and "⚠ synchronous" not in ext4[4]
    assert xfs[4].startswith("7,050 (n=2") and xfs[4].endswith("⚠ synchronous_commit=off")
    assert xfs[5].endswith("⚠ synchronous_commit=off")  # tpmTotal too
    # the same flag in the comparison, with New-Order's latency row under tpmC
    table = compare.comparison_table(
        records, ["ext4", "xfs"], "ext4",
        meanings={t: m for t in ("ext4", "xfs") if (m := meaning_of(s, t))},
    )  # fmt: skip
    (row,) = [r for r in table.rows if str(r.cells[0]).startswith("TPC-C tpmC") and r.kind]
    assert str(row.cells[2]).endswith("⚠ synchronous_commit=off")
    assert not str(row.cells[1]).endswith("synchronous_commit=off")
    (lat,) = [r for r in table.rows if str(r.cells[0]).endswith("New-Order latency")]
    assert lat.cells[1] == "p95 9.000 / p99 12.000 ms"
    assert lat.cells[3] == "p99 1.50x higher"


def test_settings_that_differ_beyond_the_four_are_named() -> None:
    """walcomp-on vs sync-on was called "same" although wal_compression differed."""
    s = with_settings(
        study(["sync-on", "walcomp-on"]),
        {"sync-on": {"port": "5432"}, "walcomp-on": {"wal_compression": "pglz", "port": "5433"}},
    )
    meanings = {t: m for t in ("sync-on", "walcomp-on") if (m := meaning_of(s, t))}
    table = compare.comparison_table(tpcc_records(), ["sync-on", "walcomp-on"], "sync-on", meanings)
    (row,) = [r for r in table.rows if r.cells[0] == "PostgreSQL settings"]
    assert row.cells[3] == "differs: wal_compression=pglz"  # the port is each server's own


def test_tpcc_chart_has_one_named_series_per_target_and_mode() -> None:
    records = tpcc_records()
    records += [
        replace(r, key=r.key.replace("/run/", "/run/client/"),
                params={**r.params, "mode": "client"},
                result=to_dict(replace(tpcc_run(3000.0), mode="client")))
        for r in records if r.kind == "tpcc_run"
    ]  # fmt: skip
    records = [
        replace(r, result=to_dict(replace(from_dict(TpccRun, r.result), timeline=(
            TpmPoint(1.0, 100.0 * i, 200.0), TpmPoint(2.0, 110.0 * i, 220.0)))))
        if r.kind == "tpcc_run" and r.result else r
        for i, r in enumerate(records, 1)
    ]  # fmt: skip
    figure = tpmc_figure(study(["ext4", "xfs"]), records)
    assert figure is not None
    assert [s.label for s in figure.series] == [
        "ext4, server-side (median of 2)", "ext4, client-side (median of 2)",
        "xfs, server-side (median of 2)", "xfs, client-side (median of 2)",
    ]  # fmt: skip
    assert [s.group for s in figure.series] == ["ext4", "ext4", "xfs", "xfs"]
    assert [s.dash for s in figure.series] == [0, 1, 0, 1]
    first = figure.series[0]  # runs 2 and 3 of the records: ext4's server-side repeats
    assert first.y == (250.0, 275.0) and first.y_low == (200.0, 220.0)
    assert first.y_high == (300.0, 330.0)


def test_tpcc_is_in_the_comparison_table_and_the_csv() -> None:
    table = compare.comparison_table(tpcc_records(), ["ext4", "xfs"], "ext4")
    (row,) = [r for r in table.rows if r.cells[0].startswith("TPC-C tpmC") and r.kind]
    assert row.cells[1].startswith("6,050 tpmC") and row.cells[2].startswith("7,050 tpmC")
    assert "+16.5%" in row.cells[3]
    rows = list(csv.DictReader(io.StringIO(export.runs_csv(tpcc_records()))))
    assert [r["tpcc_run.tpmc"] for r in rows if r["kind"] == "tpcc_run"] == [
        "6000", "6100", "7000", "7100"
    ]  # fmt: skip


def test_the_csv_keeps_every_headline_column_a_kind_declares() -> None:
    """docs/export.md promised table_bytes for relation_sizes, but the CSV wrote
    only its fixed columns and dropped the rest."""
    sizes = RelationSizes(
        "after load",
        (RelationSize("t", "table", 8192), RelationSize("t_pkey", "index", 4096, "t")),
        database_bytes=9_000_000,
    )
    records = [*tpcc_records(), rec("ext4", "tpcc/sizes", "relation_sizes", sizes)]
    reader = csv.DictReader(io.StringIO(export.runs_csv(records)))
    assert reader.fieldnames is not None and reader.fieldnames[-1] == "params"
    sizes_columns = ("table_bytes", "index_bytes", "database_bytes")
    assert {f"relation_sizes.{c}" for c in sizes_columns} <= set(reader.fieldnames)
    (row,) = [r for r in reader if r["kind"] == "relation_sizes"]
    figures = ("relation_sizes.table_bytes", "relation_sizes.index_bytes", "tpcc_run.tpmc")
    assert tuple(row[c] for c in figures) == ("8192", "4096", "")


def test_the_csv_keeps_two_kinds_figures_of_one_name_apart() -> None:
    """A pgbench run's tps and a TPC-C run's (tpmTotal / 60), a TPC-B load's
    elapsed_s and a TPC-C load's: each under its kind's name, never one column
    whose meaning changes from row to row."""
    init = PgbenchInit(scale=1, rows=100_000, elapsed_s=2.5, rows_per_s=40_000.0)
    records = [
        *tpcc_records(),
        rec("ext4", "tpcb/init", "pgbench_init", init),
        rec("ext4", "custom/c2/r1", "pgbench_run", custom_run(1.0)),
    ]
    reader = csv.DictReader(io.StringIO(export.runs_csv(records)))
    assert reader.fieldnames is not None
    assert "tps" not in reader.fieldnames and "elapsed_s" not in reader.fieldnames
    assert {"pgbench_run.tps", "tpcc_run.tps", "pgbench_init.elapsed_s", "tpcc_load.elapsed_s"} <= (
        set(reader.fieldnames)
    )  # fmt: skip
    by_kind = {r["kind"]: r for r in reader}
    assert (by_kind["pgbench_run"]["pgbench_run.tps"], by_kind["pgbench_run"]["tpcc_run.tps"]) == (
        "500", ""
    )  # fmt: skip
    assert by_kind["tpcc_run"]["pgbench_run.tps"] == "" and by_kind["tpcc_run"]["tpcc_run.tps"]
    assert by_kind["pgbench_init"]["pgbench_init.elapsed_s"] == "2.5"
    loads = (by_kind["pgbench_init"], by_kind["tpcc_load"])
    assert [row["tpcc_load.elapsed_s"] for row in loads] == ["", "10"]


def test_the_report_core_asks_the_workloads_runs_reports_and_names_none() -> None:
    """TPC-B and custom scripts share one runs report (pgbench's), asked once; a
    study whose records hold no pgbench run (TPC-C alone here, a COPY-only
    plug-in study alike) has no pgbench section, row or "Not run" line."""
    reports = registry.runs_reports()
    workloads = registry.workloads()
    assert workloads["tpcb"].runs_report is workloads["custom"].runs_report
    assert reports.count(workloads["tpcb"].runs_report) == 1
    built = view.build(study(["ext4", "xfs"]), tpcc_records())
    titles = [s.title for s in built.sections]
    assert not [t for t in titles if "pgbench" in t or "TPC-B" in t], titles
    one = view.build(study(["ext4"]), [r for r in tpcc_records() if r.target == "ext4"])
    summary = next(s for s in one.sections if s.anchor == "summary")
    rows = [str(r.cells[0]) for b in summary.blocks if isinstance(b, Table) for r in b.rows]
    assert rows and not [r for r in rows if "TPC-B" in r], rows
    assert not [s for s in one.sections if "Not run in this study." in s.paragraphs]


def test_a_scale_sweep_summary_lists_every_point_and_draws_a_line_per_scale() -> None:
    """Seed 004's layout on one target, from pgbench's runs report: runs at two
    scales (its ``sweeps``) put every point in the summary table and a line per
    scale in its figure; a study at one scale gets the TPC-B headline rows."""
    records = [
        rec("ext4", f"tpcb/s{scale}/select-only/c{c}/d30/r1", "pgbench_run",
            replace(custom_run(1.0, clients=c), mode="select-only", scale=scale,
                    tps=1000.0 * c / scale),
            workload="tpcb", mode="select-only", scale=scale, clients=c, duration_s=30)
        for scale in (1, 10) for c in (1, 2, 4)
    ]  # fmt: skip
    built = view.build(study(["ext4"]), records)
    (table,) = [b for s in built.sections if s.anchor == "summary" for b in s.blocks
                if isinstance(b, Table)]  # fmt: skip
    labels = [str(r.cells[0]) for r in table.rows]
    assert len(labels) == 6 and {"scale 1, 4 clients", "scale 10, 1 client"} <= {
        label.split("select-only, ")[1].split(", 30 s")[0] for label in labels
    }, labels
    # The sweep's figure (the answer's chart draws the same lines: it is drawn once).
    report = registry.workloads()["tpcb"].runs_report
    assert report is not None
    (figure,) = report.summary_figures(Runs(records, "ext4"))
    assert [s.label for s in figure.series] == ["scale 1", "scale 10"]
    one = [r for r in records if r.params["scale"] == 1]
    built = view.build(study(["ext4"]), one)
    (table,) = [b for s in built.sections if s.anchor == "summary" for b in s.blocks
                if isinstance(b, Table)]  # fmt: skip
    assert [str(r.cells[0]) for r in table.rows] == ["TPC-B select-only, 4 clients"]
    assert not report.summary_figures(Runs(one, "ext4"))


# -- per-statement latency ---------------------------------------------------------


def custom_run(update_ms: float, clients: int = 2) -> PgbenchRun:
    statements = (
        StatementLatency(0.001, "\\set uid random(1, :users)", 0),
        StatementLatency(update_ms, "select f_user_login(:uid);", 0),
    )
    return PgbenchRun(
        mode="custom", transaction_type="login.sql", scale=1, query_mode="prepared",
        clients=clients, threads=1, duration_s=30.0, transactions=1000, failed=0, tps=500.0,
        latency_avg_ms=update_ms, latency_stddev_ms=0.5, initial_connection_ms=None,
        statements_per_txn=1, statements=statements,
        progress=tuple(ProgressPoint(i + 1.0, 500.0, update_ms) for i in range(29)),
    )  # fmt: skip


def login_records(targets: dict[str, list[float]]) -> list[RunRecord]:
    out = []
    for target, values in targets.items():
        out.append(
            rec(
                target,
                "login/setup",
                "sql_setup",
                SetupResult((), 0.0, 10 << 20),
                workload="login",
                files=[],
            )
        )
        for i, ms in enumerate(values, 1):
            params = {"workload": "login", "mode": "custom", "clients": 2, "duration_s": 30}
            out.append(
                rec(target, f"login/c2/r{i}", "pgbench_run", custom_run(ms), **params, repeat=i)
            )
    return out


def test_custom_script_statements_side_by_side() -> None:
    """seed 000's layout: UPDATE 3.46 vs 7.15 ms; here the login function."""
    table = compare.statements_table(
        login_records({"a": [3.4, 3.5], "b": [7.1, 7.2]}), ["a", "b"], "a"
    )
    assert table is not None and table.columns == ("Statement", "a (baseline)", "b")
    cells = {r.cells[0]: r.cells[1:] for r in table.rows}
    # a latency's change is a ratio (issue 30: "N.Nx", never "+107%")
    assert cells["select f_user_login(:uid);"] == ("3.450", "7.150 (2.1x slower)")
    assert "login, 2 clients, 30 s" in cells


def test_single_target_custom_workload_shows_its_statements_and_no_scale() -> None:
    built = view.build(study(["disk"]), login_records({"disk": [3.4, 3.5]}))
    found = [t for t in tables(built.sections) if t.caption.startswith("Per-statement")]
    assert found and found[0].rows[1].cells == ("select f_user_login(:uid);", "3.450", "0")
    throughput = next(t for t in tables(built.sections) if t.caption.startswith("Throughput"))
    assert "scale" not in throughput.notes[0]


# -- seed 001's defects --------------------------------------------------------------


def test_summary_is_headed_by_the_target_name_without_an_empty_setup_row() -> None:
    built = view.build(study(["disk"]), login_records({"disk": [3.4, 3.5]}))
    summary = next(t for t in tables(built.sections) if t.caption.startswith("Headline"))
    assert summary.columns == ("Test Case", "disk")
    assert not any("setup" in r.cells[0] for r in summary.rows)


# -- storage lab ---------------------------------------------------------------------


def test_lab_targets_table_lists_the_plain_local_target() -> None:
    lab = LabInfo(description="ESSD PL1", directory="/var/tmp", disk="essd-pl1:100GiB")
    records = login_records({"local": [3.4], "pl1": [7.1]})
    records.append(rec("pl1", "lab", "storage_lab", lab))
    built = view.build(study(["local", "pl1"]), records)
    labs = next(t for t in tables(built.sections) if t.caption.startswith("Storage lab"))
    assert [r.cells[0] for r in labs.rows] == ["local", "pl1"]
    assert labs.rows[0].cells[1] == "plain directory on the host disk"


def test_overlaid_tps_over_time_says_which_repeat_it_draws() -> None:
    records = login_records({"a": [3.4, 3.5, 3.6], "b": [7.1, 7.2]})
    (fig,) = compare.tps_over_time(records, ["a", "b"])
    # every run's tps is 500 here: the first run closest to the median is drawn
    assert fig.caption.endswith(
        "Each line is the run closest to its median tps: a repeat 1 of 3, b repeat 1 of 2."
    )


def test_header_names_a_campaigns_target_not_its_directory() -> None:
    built = view.build(study(["disk"]), login_records({"disk": [3.4]}))
    assert ("Target", "disk") in built.meta


def test_the_tpcc_load_caption_says_how_each_load_was_made() -> None:
    """From the record: a load of the PL/pgSQL loader before it (it timed
    "generate"), one of pgrig's binary COPY at wal_level=minimal, one that timed
    nothing; the same way twice is said once."""
    old = replace(tpcc_load(1), jobs=1, phases={"generate": 8.4, "index": 4.7,
                                                 "vacuum analyze": 3.7})  # fmt: skip
    new = replace(tpcc_load(2), jobs=4, wal_level="minimal",
                  phases={"copy (connection-s)": 5.0, "index (connection-s)": 1.0})  # fmt: skip
    records = [
        rec(f"t{i}", "tpcc/load", "tpcc_load", load, workload="tpcc")
        for i, load in enumerate((old, new, new, tpcc_load(3)))
    ]
    table = load_table(records)
    assert table is not None
    ways = table.caption.split(" / ")
    assert len(ways) == 3
    assert ways[0] == (
        "TPC-C load (rows generated inside the server (PL/pgSQL) over 1 parallel connection, "
        "at the server's own WAL settings; indexes, keys and VACUUM ANALYZE included"
    )
    assert ways[1].startswith("rows built in numpy and sent in binary COPY over 4 parallel")
    assert "wal_level=minimal" in ways[1] and "keys and ANALYZE included" in ways[1]
    assert ways[2].startswith("loader not recorded over 2 parallel connections")
    assert table.caption.endswith("summed over the connections, which overlap")


# -- a probe compared with itself ----------------------------------------------------


def fsync(target: str, ops: float, directory: str = "/var/tmp") -> RunRecord:
    result = FsyncResult(1.0, (FsyncRow("one 8kB write", "fdatasync", ops, 1e6 / ops),))
    return rec(target, "probe/pg_test_fsync", "pg_test_fsync", result, directory=directory,
               seconds_per_test=1)  # fmt: skip


def test_a_probe_of_the_same_disk_per_target_is_not_a_difference() -> None:
    """The issue's study: pg_test_fsync in one directory once per server setting,
    read as "sync-off 6.7x slower" (395 vs 2,631 ops/s): one disk's noise."""
    records = [fsync("sync-on", 2631.0), fsync("sync-off", 395.0), fsync("other", 400.0, "/mnt")]
    table = compare.comparison_table(records, ["sync-on", "sync-off", "other"], "sync-on")
    (row,) = [r for r in table.rows if r.cells[0] == "fdatasync 8K"]
    assert "same storage as sync-on" in str(row.cells[3]) and "slower" not in str(row.cells[3])
    assert "slower" in str(row.cells[5])  # another directory: compared
    # A target behind a storage layer (a lab: a cap, a latency layer) is another disk.
    info = LabInfo(description="ESSD PL1", directory="/var/tmp", disk="essd-pl1:100GiB")
    lab = rec("sync-off", "storage/lab", "storage_lab", info)
    table = compare.comparison_table([*records, lab], ["sync-on", "sync-off"], "sync-on")
    (row,) = [r for r in table.rows if r.cells[0] == "fdatasync 8K"]
    assert "slower" in str(row.cells[3])


def test_a_report_decodes_each_stored_result_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The stored TPC-C setting study (39 records): every section reads the records
    ``view.build`` decoded at its start; no stored result is decoded twice, nor
    by the whole written report (its summary, commands and rerun lines too)."""
    from test_report_answer import stored

    study, records = stored("tpcc_settings")
    mine = {id(r.result) for r in records if r.status == "ok" and r.result is not None}
    decoded: list[int] = []
    plain = results.from_dict

    def spy(cls: type, data: object) -> object:
        if id(data) in mine:  # a record's stored result, not a part of one
            decoded.append(id(data))
        return plain(cls, data)

    monkeypatch.setattr(results, "from_dict", spy)
    view.build(study, records)
    assert len(decoded) == len(set(decoded)) > 30
    decoded.clear()
    report.write(study, records, tmp_path)
    assert len(decoded) == len(set(decoded)) > 30


def test_a_decoded_record_whose_result_is_replaced_is_decoded_afresh() -> None:
    study, records = tiny_cloud()
    first = next(r for r in records if r.kind == "pgbench_run" and r.status == "ok")
    (dec,) = registry.decoded([first])
    assert registry.decoded([dec])[0] is dec  # decoded already: kept as it is
    run = registry.typed_result(dec)
    assert isinstance(run, PgbenchRun)
    other = replace(dec, result=to_dict(replace(run, tps=run.tps + 1)))
    assert registry.typed_result(other).tps == run.tps + 1
    assert registry.typed_result(replace(dec, status="failed")) is None


def test_a_workload_is_named_by_its_declared_title() -> None:
    assert registry.title("tpcb") == "TPC-B" and registry.title("tpcc") == "TPC-C"
    assert registry.title("login") == "login"  # a custom script's own name
