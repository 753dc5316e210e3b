"""What a DBA compares, from stored records alone: latency percentiles beside
every tps, the throughput under a latency target, what a transaction cost the
server, unsafe durability flagged at the numbers it changes, and the build and
driver differences between the sides said in a conclusion."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pgrig import campaign, plan, registry
from pgrig.document.model import BETTER, Table
from pgrig.errors import UsageError
from pgrig.meaning import Meaning
from pgrig.monitor.model import MonitorResult, RunTotals, Verdict
from pgrig.plugins.builds import builds
from pgrig.policy import LatencyTarget
from pgrig.report import compare, cost, variants
from pgrig.report.evidence import Evidence
from pgrig.results import LatencySummary, PgbenchRun, RunRecord, Study, to_dict
from pgrig.storage.fsinfo import FilesystemInfo
from pgrig.storage.model import LabInfo

DEBIAN_15 = (
    "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc "
    "(Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit; from debian"
)
ZONKY_17 = (
    "PostgreSQL 17.6 on x86_64-pc-linux-gnu, compiled by gcc (Ubuntu 7.5.0-3ubuntu1~18.04) "
    "7.5.0, 64-bit; from maven:zonky"
)


def run(
    target: str,
    clients: int,
    rep: int,
    tps: float,
    p99: float | None,
    *,
    mode: str = "read-write",
    tools: dict[str, str] | None = None,
) -> RunRecord:
    latency = None
    if p99 is not None:
        latency = LatencySummary(samples=1000, sampling_rate=1.0, p50_ms=p99 / 4,
                                 p95_ms=p99 / 2, p99_ms=p99, max_ms=p99 * 2)  # fmt: skip
    result = PgbenchRun(
        mode=mode, transaction_type="<builtin: TPC-B (sort of)>", scale=1,
        query_mode="prepared", clients=clients, threads=1, duration_s=2,
        transactions=int(tps * 2), failed=0, tps=tps, latency_avg_ms=clients / tps * 1000,
        latency_stddev_ms=None, initial_connection_ms=None, statements_per_txn=5,
        latency=latency,
    )  # fmt: skip
    params = {"workload": "tpcb", "scale": 1, "duration_s": 2, "mode": mode,
              "clients": clients, "repeat": rep}  # fmt: skip
    return RunRecord(
        study="s", key=f"{target}/tpcb/s1/run/c{clients}/r{rep}", kind="pgbench_run",
        target=target, params=params, status="ok", started_at="", finished_at="",
        result=to_dict(result), tool_versions=tools or {},
    )  # fmt: skip


def curve(target: str, points: dict[int, tuple[float, float]], **kw: object) -> list[RunRecord]:
    """Two repeats per client count, tps and p99 as given (the repeats 2% apart)."""
    return [
        run(target, c, rep, tps * (1 + 0.02 * rep), p99, **kw)  # type: ignore[arg-type]
        for c, (tps, p99) in points.items()
        for rep in (1, 2)
    ]


def study(policy: dict[str, object] | None = None, names: tuple[str, ...] = ("a", "b")) -> Study:
    targets = [{"name": n} for n in names]
    return Study(id="s", name="s", target="", started_at="", status="finished",
                 params={"targets": targets, "baseline": names[0],
                         "policy": policy or {}})  # fmt: skip


def cells(table: Table, label: str) -> tuple[str, ...]:
    row = next(r for r in table.rows if str(r.cells[0]).startswith(label))
    return tuple(str(c) for c in row.cells)


# -- latency beside tps --------------------------------------------------------------


def test_every_comparison_table_shows_p95_and_p99_beside_the_tps() -> None:
    records = curve("a", {4: (1000.0, 8.0)}) + curve("b", {4: (1200.0, 4.0)})
    table = compare.comparison_table(records, ["a", "b"], "a")
    row = cells(table, "TPC-B read-write, scale 1, 4 clients, 2 s: latency")
    assert row[1] == "p95 4.000 / p99 8.000 ms"
    assert row[2] == "p95 2.000 / p99 4.000 ms"
    assert row[3] == "p99 2.00x lower"
    # The versions table: a latency column per version.
    versions = Study(
        id="s", name="s", target="", started_at="", status="finished",
        params={"targets": [{"name": "a", "pg_version": "15"}, {"name": "b", "pg_version": "17"}],
                "baseline": "a"},
    )  # fmt: skip
    section = variants.versions_section(versions, records)
    assert section is not None
    first = section.blocks[0]
    assert isinstance(first, Table)
    assert first.columns[-2:] == ("a latency", "b latency")
    assert first.rows[0].cells[-2:] == ("p95 4.000 / p99 8.000 ms", "p95 2.000 / p99 4.000 ms")
    # The settings axes table too.
    axes = Study(
        id="s", name="s", target="", started_at="", status="finished",
        params={"targets": [{"name": "a", "axes": [["io_method", "sync"]]},
                            {"name": "b", "axes": [["io_method", "worker"]]}], "baseline": "a"},
    )  # fmt: skip
    section = variants.axes_section(axes, records)
    assert section is not None
    table = section.blocks[0]
    assert isinstance(table, Table)
    i = table.columns.index("latency")
    assert [r.cells[i] for r in table.rows] == [
        "p95 4.000 / p99 8.000 ms",
        "p95 2.000 / p99 4.000 ms",
    ]


def test_runs_without_a_latency_log_get_no_latency_row() -> None:
    records = [run("a", 1, 1, 500.0, None), run("b", 1, 1, 600.0, None)]
    table = compare.comparison_table(records, ["a", "b"], "a")
    assert not any(str(r.cells[0]).endswith(": latency") for r in table.rows)


# -- throughput under a latency target -----------------------------------------------


def test_the_throughput_under_a_latency_target_is_the_best_point_that_met_it() -> None:
    # a: p99 within 5 ms up to 4 clients; b: never within it.
    records = curve("a", {1: (500.0, 2.0), 4: (1500.0, 4.5), 8: (1800.0, 9.0)}) + curve(
        "b", {1: (450.0, 6.0), 4: (1400.0, 12.0)}
    )
    section = cost.section(study({"latency_target": "p99 <= 5 ms"}), records)
    assert section is not None
    table = section.blocks[0]
    assert isinstance(table, Table) and "p99 <= 5 ms" in table.caption
    row = cells(table, "TPC-B read-write")
    # 4 clients: the median of 1,530 and 1,560 tps
    assert row[1] == "1,545 tps at 4 clients (p99 4.500 ms)"
    assert row[2] == "none within: the lowest p99 was 6.000 ms at 1 client"
    # No target named: no table.
    assert cost.section(study(), records) is None


@pytest.mark.parametrize("text", ["p99 < 5 ms", "p99<=0.5ms", " p95 <= 2 ms "])
def test_a_latency_target_is_read_in_its_forms(text: str) -> None:
    goal = LatencyTarget.parse(text)
    assert goal.percentile in (95, 99) and goal.limit_ms > 0


@pytest.mark.parametrize("bad", ["p99 <= fast", "p98 <= 5 ms", "p99 <= 0 ms", "5 ms"])
def test_a_bad_latency_target_is_refused_naming_the_key(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[campaign]\nname = "x"\nlatency_target = "{bad}"\n\n'
        f'[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n'
    )
    with pytest.raises(UsageError) as caught:
        campaign.load(path)
    message = str(caught.value)
    assert "latency_target" in message and repr(bad) in message
    assert "p99 <= 5 ms" in (caught.value.hint or "")


# -- per-transaction cost --------------------------------------------------------------


def monitored(rec: RunRecord, totals: RunTotals, version: int = 150000) -> RunRecord:
    mon = MonitorResult(
        interval_s=1.0, ncpu=2, started_at=0.0, client_started_at=None, devices=(),
        samples=(), verdict=Verdict("unknown", "", ""), server_version_num=version,
        totals=totals,
    )  # fmt: skip
    return RunRecord(
        study="s", key=rec.key + "/monitor", kind="monitor", target=rec.target,
        params={}, status="ok", started_at="", finished_at="", result=to_dict(mon),
    )  # fmt: skip


def test_per_transaction_cost_from_the_server_counters() -> None:
    a, b = run("a", 2, 1, 1000.0, 3.0), run("b", 2, 1, 1000.0, 3.0)
    records = [
        a,
        monitored(
            a,
            RunTotals(
                2.0,
                2000.0,
                1,
                1_200_000.0,
                1900.0,
                0.5,
                wal_fpi=300.0,
                wal_sync_ms=0.0,
                device_reads=100.0,
                device_writes=4000.0,
                device_bytes=40_960_000.0,
            ),
        ),  # fmt: skip
        b,
        # PostgreSQL 13: no pg_stat_wal
        monitored(b, RunTotals(2.0, 2000.0, 0, None, None, 0.25), version=130000),
    ]
    table = cost.cost_table(records, ["a", "b"])
    assert table is not None
    rows = {r.cells[1]: r.cells[3:] for r in table.rows}
    assert rows["a"] == (
        "600 (0.15 FPI)", "0.95 (wait not timed)", "0.250", "0.05 / 2.00 (20.0 KiB)", "1 in 1 run"
    )  # fmt: skip
    assert rows["b"] == (
        "n/a (PG < 14)", "n/a (PG < 14)", "0.125", "no device sampled", "0 in 1 run"
    )  # fmt: skip
    # Unmonitored runs: no table of blanks.
    assert cost.cost_table([a, b], ["a", "b"]) is None
    # seed001-login syncs with open_datasync: pg_stat_wal counts no wal_sync, and
    # "0.00 WAL syncs per commit" would read as commits that wait for nothing.
    table = cost.cost_table(records, ["a", "b"], {"a": "open_datasync"})
    assert table is not None
    assert (
        table.rows[0].cells[4]
        == "n/a (open_datasync: each WAL write syncs, no fsync call to count)"
    )
    # What moved against a: the CPU halved; WAL not comparable (b has none). One
    # run a side decides nothing: said as not yet, the change still shown.
    moved = cost.moved_table(records, ["a", "b"], "a")
    assert moved is not None
    assert moved.rows[0].cells[1:] == (
        "b",
        "? not yet (1 vs 1 runs: a verdict needs ≥ 3 a side): server CPU ms -50% (0.250 -> 0.125)",
    )


def test_what_moved_is_decided_from_the_runs_as_every_comparison_is() -> None:
    """Three runs a side: WAL syncs per commit fall from 0.6 to 0.01 (▲ less work),
    WAL bytes are the same runs in another order (= the same within ±5%), the CPU
    scatters from 0.3 to 0.9 ms per commit on one side (? not yet, with the runs
    that would decide it)."""
    records = []
    cpu = {"on": (1.0, 1.0, 1.0), "off": (0.6, 1.2, 1.8)}
    wal = {"on": (1.00e6, 1.01e6, 1.02e6), "off": (1.02e6, 1.00e6, 1.01e6)}
    for target, syncs in (("on", 1200.0), ("off", 20.0)):
        for rep in (1, 2, 3):
            r = run(target, 2, rep, 1000.0, 3.0)
            i = rep - 1
            totals = RunTotals(2.0, 2000.0, 0, wal[target][i], syncs + rep, cpu[target][i])
            records += [r, monitored(r, totals)]
    moved = cost.moved_table(records, ["on", "off"], "on")
    assert moved is not None and "against on" in moved.caption
    (row,) = moved.rows
    said = re.split(r"; (?=[▲▼=?] )", row.cells[2])  # one figure each
    assert said[0].startswith("▲ WAL syncs -98% (0.60 -> 0.01; 9") and "% CI " in said[0]
    (cpu_said,) = [p for p in said if p.startswith("? server CPU ms +")]
    assert "not yet" in cpu_said and "runs a side would decide it at this noise" in cpu_said
    assert said[-1] == "= WAL bytes the same within ±5%"
    assert row.marks == ("", "", BETTER)
    assert any("Benjamini-Hochberg" in n for n in moved.notes)  # the table's family


# -- unsafe durability at the row ------------------------------------------------------


def lab(target: str, options: str) -> RunRecord:
    fs = FilesystemInfo(
        fstype="ext4", device="/dev/loop3", major_minor="7:3", size_bytes=2**30,
        mountpoint="/mnt", data_dir="/mnt/data", mkfs_options=(), mkfs_argv=(),
        mount_options_asked=tuple(options.split(",")), mount_options=f"rw,{options}",
        options_not_shown=(), log_device=None, backing_file="/var/tmp/f", direct_io=True,
        host_filesystem="ext4 on /dev/vda", mountinfo_line="", details="",
        kernel_messages=("EXT4-fs (loop3): barriers disabled",) if "nobarrier" in options else (),
    )  # fmt: skip
    info = LabInfo(description="ext4", directory="/mnt/data", filesystem=fs)
    return RunRecord(
        study="s", key=f"{target}/lab", kind="storage_lab", target=target, params={},
        status="ok", started_at="", finished_at="", result=to_dict(info),
    )  # fmt: skip


def test_barriers_off_and_asynchronous_commit_are_flagged_at_every_row_they_change() -> None:
    records = [lab("xfs", "noatime"), lab("ext4", "noatime,nobarrier")]
    records += curve("xfs", {4: (1000.0, 5.0)}) + curve("ext4", {4: (2200.0, 2.0)})
    records += curve("xfs", {4: (9000.0, 1.0)}, mode="select-only")
    records += curve("ext4", {4: (9100.0, 1.0)}, mode="select-only")
    meanings = {
        "xfs": Meaning.of({}, "stock"),
        "ext4": Meaning.of({"synchronous_commit": "off"}, "oltp"),
    }
    table = compare.comparison_table(records, ["xfs", "ext4"], "xfs", meanings)
    tps = cells(table, "TPC-B read-write, scale 1, 4 clients, 2 s: tps")
    assert "⚠" not in tps[1]
    assert "⚠ barriers off (nobarrier); synchronous_commit=off" in tps[2]
    qps = cells(table, "TPC-B read-write, scale 1, 4 clients, 2 s: qps")
    assert "barriers off" in qps[2]
    # A read-only figure waits for no flush: not flagged.
    reads = cells(table, "TPC-B select-only, scale 1, 4 clients, 2 s")
    assert "barriers off" not in reads[2]


# -- builds and drivers in the conclusion ---------------------------------------------


@dataclass
class Found:
    records: tuple[RunRecord, ...]
    targets: tuple[str, ...]
    baseline: str


def test_differing_compilers_sources_and_pgbench_majors_are_said() -> None:
    records = [
        run("pg15", 1, 1, 900.0, 3.0,
            tools={"server": DEBIAN_15, "pgbench": "pgbench (PostgreSQL) 15.18 (Debian)"}),
        run("pg17", 1, 1, 1000.0, 3.0,
            tools={"server": ZONKY_17, "pgbench": "pgbench (PostgreSQL) 15.18 (Debian)"}),
    ]  # fmt: skip
    found = builds(Found(tuple(records), ("pg15", "pg17"), "pg15"))
    assert len(found) == 1
    text = found[0].text
    assert "pg15 = PostgreSQL 15.18 from debian, compiled by gcc 12.2.0" in text
    assert "pg17 = PostgreSQL 17.6 from maven:zonky, compiled by gcc 7.5.0" in text
    assert "driven by pgbench 15" in text
    assert "the compiler and build source" in text  # one pgbench drove both: not said
    # A pgbench of another major on one side is named.
    pg17_tools = {"server": ZONKY_17, "pgbench": "pgbench (PostgreSQL) 17.6"}
    records[1] = run("pg17", 1, 1, 1000.0, 3.0, tools=pg17_tools)
    text = builds(Found(tuple(records), ("pg15", "pg17"), "pg15"))[0].text
    assert "driven by pgbench 17" in text and "pgbench major" in text
    # The rule is registered like the others.
    assert builds in list(registry.rules())


def test_the_same_build_and_driver_on_both_sides_is_not_said() -> None:
    tools = {"server": DEBIAN_15, "pgbench": "pgbench (PostgreSQL) 15.18 (Debian)"}
    records = [run(t, 1, 1, 900.0, 3.0, tools=tools) for t in ("a", "b")]
    assert builds(Found(tuple(records), ("a", "b"), "a")) == []


def test_versions_table_shows_tps_including_connections_where_recorded() -> None:
    """Seed 004 quoted tps including connection time: pgbench 13 printed it (kept
    as printed), 14 and later print the connection time (derived from it)."""
    from dataclasses import replace

    printed = [replace(r, result={**r.result, "tps_including_printed": 990.0})
               for r in curve("a", {4: (1000.0, 8.0)})]  # fmt: skip
    derived = [replace(r, result={**r.result, "initial_connection_ms": 100.0})
               for r in curve("b", {4: (1000.0, 4.0)})]  # fmt: skip
    versions = Study(
        id="s", name="s", target="", started_at="", status="finished",
        params={"targets": [{"name": "a", "pg_version": "13"}, {"name": "b", "pg_version": "17"}],
                "baseline": "a"},
    )  # fmt: skip
    section = variants.versions_section(versions, printed + derived)
    assert section is not None and isinstance(section.blocks[0], Table)
    table = section.blocks[0]
    i = table.columns.index("a incl. connections")
    assert table.columns[i + 1] == "b incl. connections"
    # b: 2,040 and 2,080 transactions at 1,020 and 1,040 tps, plus 0.1 s connecting:
    # 971 and 990, their median 981
    assert table.rows[0].cells[i : i + 2] == ("990", "981")
    assert any("the figure seed 004 quoted" in n for n in table.notes)
    # Not recorded (the first test's runs): no such column.
    plain = curve("a", {4: (1000.0, 8.0)}) + curve("b", {4: (1000.0, 4.0)})
    bare = variants.versions_section(versions, plain)
    assert bare is not None and isinstance(bare.blocks[0], Table)
    assert not any("incl. connections" in c for c in bare.blocks[0].columns)


def test_a_rate_sweep_is_planned_one_run_per_offered_rate(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[campaign]\nname = "x"\nrepeat = 1\nlatency_target = "p99 <= 5 ms"\n\n'
        f'[[target]]\nname = "t"\ndirectory = "{tmp_path}"\n\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["read-write"]\nclients = [2]\n'
        "duration = 2\ncount = false\nrates = [400, 100]\n\n"
        '[[workload]]\ntype = "tpcc"\nwarehouses = 1\nconnections = 2\nduration = 2\n'
        'modes = ["server"]\ncheck = "none"\nrates = [50]\n\n'
        '[[workload]]\ntype = "custom"\nname = "one"\nscripts = ["one.sql"]\nclients = [1]\n'
        "duration = 2\nrates = [10, 20]\n"
    )
    (tmp_path / "one.sql").write_text("SELECT 1;\n")
    camp = campaign.load(path)
    runs = [s for _v, s in plan.steps(camp) if s.kind in ("pgbench_run", "tpcc_run")]
    assert [s.id for s in runs] == [
        "t/tpcb/s1/read-write/c2/d2/R100/r1", "t/tpcb/s1/read-write/c2/d2/R400/r1",
        "t/tpcc/run/server/c2/R50", "t/one/c1/d2/R10/r1", "t/one/c1/d2/R20/r1",
    ]  # fmt: skip
    assert [s.params["rate"] for s in runs] == [100.0, 400.0, 50.0, 10.0, 20.0]
    assert {s.params["latency_target"] for s in runs} == {"p99 <= 5 ms"}
    path.write_text(path.read_text().replace("rates = [400, 100]", "rate = 5\nrates = [1]"))
    with pytest.raises(UsageError, match="rate and rates together"):
        campaign.load(path)


def test_the_throughput_within_the_goal_reads_a_rate_sweep() -> None:
    """Offered rates at one client count: the highest whose p99 met the goal."""
    records = []
    for target, points in (("a", {100: 2.0, 200: 3.0, 400: 9.0}), ("b", {100: 4.0, 200: 7.0})):
        for rate, p99 in points.items():
            for i in (1, 2):
                rec = run(target, 2, i, rate * 0.98, p99)
                records.append(replace(rec, key=f"{rec.key}/R{rate}",
                                       params={**rec.params, "rate": float(rate),
                                               "latency_target": "p99 <= 5 ms"}))  # fmt: skip
    goal = LatencyTarget.parse("p99 <= 5 ms")
    (row,) = cost.target_table(records, ["a", "b"], goal).rows
    assert row.cells[1] == "196 tps at 2 clients, 200 tps offered (p99 3.000 ms)"
    assert row.cells[2] == "98.0 tps at 2 clients, 100 tps offered (p99 4.000 ms)"
    (figure,) = cost.rate_figures(records, ["a", "b"], goal)
    assert figure.series[0].x == (100.0, 200.0, 400.0) and figure.series[0].y == (2.0, 3.0, 9.0)
    assert figure.series[-1].label == "the goal: p99 <= 5 ms"
    (said,) = cost.goal_rule(Evidence(tuple(records), ("a", "b"), "a"))
    assert said.rule == "latency-target" and said.text.startswith(
        "Within p99 <= 5 ms, TPC-B read-write, scale 1, 2 s: a 196 tps at 2 clients"
    )


def test_a_point_is_named_by_its_result_kind_in_the_cost_tables() -> None:
    """TPC-C's kind names its point (``ResultKind.case``: mode, active warehouses);
    a kind that declares none is named by its workload and mode. The core adds the
    connections, the offered rate and the duration."""

    def rec(kind: str, **params: object) -> RunRecord:
        return RunRecord(
            study="s", key="k", kind=kind, target="t", params=params, status="ok",
            started_at="", finished_at="",
        )  # fmt: skip

    tpcc = {"workload": "tpcc", "mode": "server", "connections": 4, "warehouses": 4}
    assert cost.case_label(rec("tpcc_run", **tpcc, active=1, duration_s=3)) == (
        "TPC-C server-side, 1 of 4 warehouses active, 4 connections, 3 s"
    )
    assert cost.case_label(rec("tpcc_run", **tpcc, active=4)) == "TPC-C server-side, 4 connections"
    toy = rec("toy_sum", workload="toy", mode="fast", clients=2, rate=50, duration_s=1)
    assert cost.case_label(toy) == "toy fast, 2 connections, 50 tps offered, 1 s"
