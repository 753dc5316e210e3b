"""Each conclusion rule on records shaped to provoke it, and on records that must
not. Synthetic records (the rules are pure functions of stored results); the
same rules run on the real records of tests/data/report in test_report.py."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from pgrig.durability.model import Check, Crash, DurabilityResult
from pgrig.durability.report import durable  # the durability workload brings its rule
from pgrig.errors import ToolError
from pgrig.meaning import Meaning
from pgrig.monitor.model import MonitorResult, Verdict
from pgrig.report import conclusions as c
from pgrig.results import (
    Cpu,
    Environment,
    FsyncResult,
    FsyncRow,
    LatencySummary,
    PgbenchInit,
    PgbenchRun,
    ProgressPoint,
    RunRecord,
    from_dict,
    to_dict,
)
from pgrig.workloads.basebackup.model import BasebackupResult
from pgrig.workloads.tpcc.model import TpccRun

MONITOR_DATA = Path(__file__).parent / "data" / "monitor"


def run(tps: float, *, clients: int = 2, latency: float = 1.0, per_s: list[float] | None = None):
    seconds = per_s if per_s is not None else [tps] * 10
    return PgbenchRun(
        mode="read-write",
        transaction_type="<builtin: TPC-B (sort of)>",
        scale=1,
        query_mode="prepared",
        clients=clients,
        threads=1,
        duration_s=float(len(seconds)),
        transactions=int(tps * len(seconds)),
        failed=0,
        tps=tps,
        latency_avg_ms=latency,
        latency_stddev_ms=None,
        initial_connection_ms=None,
        statements_per_txn=5,
        progress=tuple(ProgressPoint(i + 1.0, t, latency) for i, t in enumerate(seconds)),
    )


def record(target: str, key: str, kind: str, result: object, **params: object) -> RunRecord:
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


def runs(
    target: str, tps: list[float], clients: int = 2, scale: int = 1, **kw: object
) -> list[RunRecord]:
    return [
        record(
            target,
            f"tpcb/s{scale}/run/read-write/c{clients}/r{i}",
            "pgbench_run",
            run(t, clients=clients, **kw),  # type: ignore[arg-type]
            workload="tpcb",
            scale=scale,
            duration_s=10,
            mode="read-write",
            clients=clients,
            repeat=i,
        )
        for i, t in enumerate(tps)
    ]


def evidence(records: list[RunRecord], **kw: object) -> c.Evidence:
    targets = sorted({r.target for r in records})
    return c.Evidence(tuple(records), tuple(targets), targets[0], **kw)  # type: ignore[arg-type]


def env(hypervisor: str | None) -> Environment:
    cpu = Cpu("AMD EPYC", 1, 2, 1, 2, hypervisor=hypervisor)
    return Environment("2026-11-25T00:00:00+00:00", "vm", "Debian 12", "6.1", cpu, 24 << 30)


# -- differs ------------------------------------------------------------------


def test_differs_names_the_faster_target_with_its_p_value() -> None:
    found = c.differs(
        evidence(runs("a-ext4", [1000, 1010, 990]) + runs("b-xfs", [1200, 1190, 1210]))
    )
    (only,) = found
    assert only.text.startswith("TPC-B read-write: b-xfs runs 20% faster at 2 clients than a-ext4")
    # the interval and p of the one procedure; p under 0.001 said so, never "p=0.000"
    assert "(95% CI +17.5 to +22.6%; p<0.001;" in only.text and only.significance == "better"


def test_differs_names_no_winner_inside_the_noise() -> None:
    found = c.differs(evidence(runs("a", [1000, 1100, 900]) + runs("b", [1050, 950, 1080])))
    (only,) = found
    assert "b against a: not yet decided at 2 clients: ? +" in only.text
    assert "runs a side would decide it" in only.text and "no difference" not in only.text
    assert "faster" not in only.text and "slower" not in only.text


def test_differs_on_two_runs_a_side_calls_no_winner_as_the_summary_does() -> None:
    """seed000: "pl3-latency runs 91% slower (p<=0.028)" above a summary table
    that said "not called: 2 vs 2 runs (p=0.028, q=0.16)"."""
    (only,) = c.differs(evidence(runs("a", [10000, 11000]) + runs("b", [900, 1000])))
    assert "runs" in only.text and "slower than" not in only.text
    assert "2 vs 2 runs: a verdict needs ≥ 3 a side" in only.text
    assert only.text.startswith("TPC-B read-write: b against a: not yet decided at 2 clients: ?")


def test_differs_without_repeats_says_no_test() -> None:
    (only,) = c.differs(evidence(runs("a", [1000]) + runs("b", [2000])))
    assert "not yet decided" in only.text and "faster" not in only.text
    assert "1 vs 1 runs: a verdict needs ≥ 3 a side" in only.text


# -- headline -----------------------------------------------------------------


def backups(target: str, mb_per_s: list[float]) -> list[RunRecord]:
    mb = 850 * 10**6  # MB/s are of 10^6 bytes, as pg_basebackup's seed quoted them
    return [
        record(
            target,
            f"basebackup/s50/backup/r{i}",
            "basebackup",
            BasebackupResult(
                mb,
                mb,
                1000,
                850 / v,
                "plain",
                "fast",
                "stream",
                "none",
                None,
                "same target",
                "xfs",
                "pg_basebackup 15",
            ),
            workload="basebackup",
            scale=50,
        )  # fmt: skip
        for i, v in enumerate(mb_per_s)
    ]


def test_a_backup_faster_on_one_target_is_said_with_its_p_value() -> None:
    """Seed 002's last finding: pg_basebackup 796 MB/s on XFS, 354 on ext4."""
    xfs, ext4 = backups("a-xfs", [796, 790, 801]), backups("b-ext4", [354, 350, 360])
    (only,) = c.headline(evidence(xfs + ext4))
    assert only.text.startswith("pg_basebackup: b-ext4 vs a-xfs ▼ -55.4% (95% CI -56.7 to -54.1%")
    assert "median 354 MB/s on b-ext4, 796 on a-xfs" in only.text and "p<0.001" in only.text


def test_backups_within_the_noise_or_once_each_name_no_winner() -> None:
    (noisy,) = c.headline(evidence(backups("a", [110, 80, 120]) + backups("b", [92, 100, 75])))
    assert "b vs a ? -13.2%, not yet (95% CI" in noisy.text
    (once,) = c.headline(evidence(backups("a", [110]) + backups("b", [92])))
    assert "not yet (1 vs 1 runs: a verdict needs ≥ 3 a side" in once.text
    assert c.headline(evidence(runs("a", [1000, 1010]) + runs("b", [900, 910]))) == []


def tpcc(target: str, tpmc: list[float], *, mode: str, active: int) -> list[RunRecord]:
    return [
        record(
            target,
            f"tpcc/w8/{mode}/a{active}/r{i}",
            "tpcc_run",
            TpccRun(
                mode=mode,
                warehouses=8,
                active=active,
                connections=4,
                threads=1,
                duration_s=10.0,
                isolation="repeatable read",
                transactions=1000,
                failed=0,
                retried=0,
                retries=0,
                serialization_failures=0,
                deadlock_failures=0,
                tpmc=v,
                tpm_total=v * 2.2,
                tps=v * 2.2 / 60,
                rollbacks=1,
                latency_avg_ms=4.0,
            ),
            workload="tpcc",
            mode=mode,
            active=active,
            warehouses=8,
        )  # fmt: skip
        for i, v in enumerate(tpmc)
    ]


def test_two_active_sets_and_two_modes_never_share_a_tpcc_conclusion() -> None:
    """Issue 31: one t-test took both active sets (13,892 and 8,469) and quoted
    a median between them. Each point is compared on its own."""
    records = [
        *tpcc("a", [13900, 13880, 13895], mode="server", active=2),
        *tpcc("b", [13000, 13010, 12990], mode="server", active=2),
        *tpcc("a", [8470, 8460, 8475], mode="server", active=8),
        *tpcc("b", [8000, 8010, 7990], mode="server", active=8),
        *tpcc("a", [5000, 5010, 4990], mode="client", active=8),
        *tpcc("b", [5005, 4995, 5000], mode="client", active=8),
    ]
    found = c.headline(evidence(records))
    assert len(found) == 3, [f.text for f in found]
    by_point = {f.text.split(":")[0]: f.text for f in found}
    assert set(by_point) == {
        "TPC-C tpmC (tpcc), server-side, 2 of 8 warehouses active",
        "TPC-C tpmC (tpcc), server-side, 8 of 8 warehouses active",
        "TPC-C tpmC (tpcc), client-side, 8 of 8 warehouses active",
    }, by_point
    assert "median 13,000" in by_point["TPC-C tpmC (tpcc), server-side, 2 of 8 warehouses active"]
    assert "median 8,000" in by_point["TPC-C tpmC (tpcc), server-side, 8 of 8 warehouses active"]
    assert (
        "the same within ±5%"
        in by_point["TPC-C tpmC (tpcc), client-side, 8 of 8 warehouses active"]
    )


# -- load ---------------------------------------------------------------------


def init(seconds: float) -> PgbenchInit:
    return PgbenchInit(scale=10, rows=1_000_000, elapsed_s=seconds, rows_per_s=1e6 / seconds)


def loads(target: str, times: list[float]) -> list[RunRecord]:
    return [
        record(target, f"tpcb/init/r{i}", "pgbench_init", init(t), workload="tpcb", scale=10)
        for i, t in enumerate(times)
    ]


def test_load_faster_when_repeated_loads_differ() -> None:
    (only,) = c.load(
        evidence(loads("a-ext4", [13.0, 13.2, 12.9]) + loads("b-xfs", [10.0, 10.1, 9.9]))
    )
    assert only.text.startswith("Loading TPC-B scale 10 took 10.00 s on b-xfs, 13.00 s on a-ext4")
    # a duration's change as a ratio, its interval read the same way
    assert "b-xfs vs a-ext4 ▲ 1.3x faster (95% CI 1.2" in only.text


def test_load_once_each_names_no_winner() -> None:
    (only,) = c.load(evidence(loads("a", [13.0]) + loads("b", [10.0])))
    assert "faster" not in only.text and "no winner named" in only.text
    # seed002 (repeat = 3) was told "n=1 vs 1: repeat >= 3 for a test": repeat
    # repeats the runs, never the load
    assert "once each, no verdict" in only.text and "repeat" not in only.text


# -- stalls -------------------------------------------------------------------


def test_stalls_to_zero_tps_are_said_with_their_seconds() -> None:
    per_s = [500.0] * 6 + [0.0, 0.0, 3.0] + [500.0] * 6
    (only,) = c.stalls(evidence(runs("ext4", [450.0], clients=8, per_s=per_s)))
    assert only.text.startswith("ext4: TPC-B read-write at 8 clients stalled to 0.00 tps")
    assert "3 of 15 seconds at or below 10% of the median 500 tps" in only.text


def test_a_dip_that_is_not_a_stall_is_not_said() -> None:
    per_s = [500.0] * 6 + [300.0, 0.0] + [500.0] * 6  # one second at 0 is a hiccup
    assert c.stalls(evidence(runs("ext4", [450.0], per_s=per_s))) == []


# -- fsync-bound --------------------------------------------------------------


def fsync(usecs: float) -> FsyncResult:
    row = FsyncRow("Compare file sync methods using one 8kB write", "fdatasync", 1e6 / usecs, usecs)
    return FsyncResult(5.0, (row,))


def test_single_client_commits_bounded_by_fsync() -> None:
    records = runs("cloud", [4000.0], clients=1, latency=0.25)
    records.append(record("cloud", "probe/pg_test_fsync", "pg_test_fsync", fsync(164.0)))
    (only,) = c.fsync_bound(evidence(records))
    assert "cloud: single-client commits are bounded by fsync latency" in only.text
    assert "fdatasync takes 164 us" in only.text and "66% of the 0.250 ms" in only.text


def test_the_ceiling_is_the_servers_own_sync_method() -> None:
    """seed001-login: its server syncs with open_datasync, and the report quoted
    fdatasync's ceiling (seed 001 measured 11,310 ops/s open_datasync against 9,874
    fdatasync, 16 kB writes: pg_test_fsync's one-write section)."""
    records = runs("disk", [4000.0], clients=1, latency=0.25)
    rows = (
        FsyncRow("Compare file sync methods using one 8kB write", "open_datasync", 1e6 / 150, 150),
        FsyncRow("Compare file sync methods using one 8kB write", "fdatasync", 1e6 / 200, 200),
    )
    records.append(record("disk", "probe/pg_test_fsync", "pg_test_fsync", FsyncResult(5.0, rows)))
    meaning = Meaning.of({"wal_sync_method": "open_datasync"}, "seed001")
    (only,) = c.fsync_bound(evidence(records, meanings={"disk": meaning}))
    assert "one open_datasync takes 150 us" in only.text and "fdatasync" not in only.text
    (plain,) = c.fsync_bound(evidence(records))  # no setting reported: Linux's default
    assert "one fdatasync takes 200 us" in plain.text


def test_a_probe_slower_than_the_whole_transaction_is_not_a_share_of_it() -> None:
    """seed000-latency: pg_test_fsync's 908 us beside 0.470 ms transactions was
    printed as "100% of the 0.470 ms" - a sync cannot outlast its commit, so no
    bound is named and the refutation is said instead."""
    records = runs("local", [2122.0], clients=1, latency=0.47)
    records.append(record("local", "probe/pg_test_fsync", "pg_test_fsync", fsync(908.0)))
    (only,) = c.fsync_bound(evidence(records))
    assert "bounded by fsync" not in only.text and "100%" not in only.text
    assert "a whole transaction took 0.470 ms on average" in only.text
    assert "one client committed 2,122 transactions a second, 193% of the probe's" in only.text


def with_syncs(rec: RunRecord, syncs: list[float]) -> RunRecord:
    """The monitor's record of ``rec`` whose samples saw ``syncs`` WAL syncs a second."""
    data = json.loads((MONITOR_DATA / "result_storage_read.json").read_text())
    mon = from_dict(MonitorResult, data["monitor"])
    samples = tuple(
        dataclasses.replace(s, in_run=True, pg=dataclasses.replace(s.pg, wal_syncs_s=v))
        for s, v in zip(mon.samples, syncs, strict=False)
        if s.pg is not None
    )
    mon = dataclasses.replace(mon, samples=samples, verdict=Verdict("wal", "wal", "wal: n"))
    return dataclasses.replace(rec, key=rec.key + "/monitor", kind="monitor", result=to_dict(mon))


def test_seed000_latency_fsync_bound_refuted_by_its_own_latency_and_wal_syncs() -> None:
    """Issue 30: "commits bounded by fsync, 2,141 us = 88% of 2.444 ms" was said while
    the median transaction took 0.841 ms and WAL syncs ran at 115% / 246% of the 467
    ops/s pg_test_fsync measured. Each contradiction alone withholds the bound."""
    probe = record("essd-pl3", "probe/pg_test_fsync", "pg_test_fsync", fsync(2141.0))
    latency = LatencySummary(900, 1.0, 0.841, 9.0, 12.0, 20.0)

    def one(*, p50: bool, syncs: list[float] | None) -> list[RunRecord]:
        made = runs("essd-pl3", [409.0, 405.0], clients=1, latency=2.444)
        if p50:
            made = [
                dataclasses.replace(r, result={**(r.result or {}), "latency": to_dict(latency)})
                for r in made
            ]
        watched_runs = [with_syncs(r, syncs) for r in made] if syncs else []
        return [*made, *watched_runs, probe]

    # Both contradictions, as seed000-latency had them.
    (both,) = c.fsync_bound(evidence(one(p50=True, syncs=[539.0, 539.0, 1151.0, 500.0])))
    assert "bounded by fsync" not in both.text
    assert "the median transaction took 0.841 ms" in both.text
    assert "synced WAL 539 times a second (median; 1,151 peak" in both.text
    assert "115% of the probe's rate" in both.text
    # The median latency alone, and the WAL sync rate alone, each refute it.
    (p50_only,) = c.fsync_bound(evidence(one(p50=True, syncs=None)))
    assert "bounded by fsync" not in p50_only.text and "0.841 ms" in p50_only.text
    (syncs_only,) = c.fsync_bound(evidence(one(p50=False, syncs=[539.0, 560.0, 1151.0])))
    assert "bounded by fsync" not in syncs_only.text and "synced WAL" in syncs_only.text
    # Neither: the runs agree with the probe, and the bound is said.
    (agreed,) = c.fsync_bound(evidence(one(p50=False, syncs=[400.0, 405.0, 410.0])))
    assert "essd-pl3: single-client commits are bounded by fsync latency" in agreed.text
    assert "88% of the 2.444 ms" in agreed.text


def test_fast_fsync_or_asynchronous_commit_is_not_fsync_bound() -> None:
    fast = runs("local", [4000.0], clients=1, latency=0.25)
    fast.append(record("local", "probe/pg_test_fsync", "pg_test_fsync", fsync(30.0)))
    assert c.fsync_bound(evidence(fast)) == []
    slow = runs("cloud", [4000.0], clients=1, latency=0.25)
    slow.append(record("cloud", "probe/pg_test_fsync", "pg_test_fsync", fsync(164.0)))
    meaning = {"cloud": Meaning.of({"synchronous_commit": "off"}, "oltp")}
    assert c.fsync_bound(evidence(slow, meanings=meaning)) == []


# -- wait-bound ---------------------------------------------------------------


def watched(records: list[RunRecord], causes: list[str]) -> list[RunRecord]:
    data = json.loads((MONITOR_DATA / "result_storage_read.json").read_text())
    base = from_dict(MonitorResult, data["monitor"])
    out = list(records)
    for rec, cause in zip(records, causes, strict=True):
        mon = dataclasses.replace(base, verdict=Verdict(cause, cause, f"{cause}: numbers"))
        out.append(
            dataclasses.replace(rec, key=rec.key + "/monitor", kind="monitor", result=to_dict(mon))
        )
    return out


def test_reads_bound_by_datafileread() -> None:
    records = watched(runs("big", [100.0, 110.0, 105.0], clients=8), ["read", "read", "cpu"])
    (only,) = c.wait_bound(evidence(records))
    assert only.text.startswith("big: TPC-B read-write at 8 clients is bound by data-file reads")
    assert "2 of 3 run(s)" in only.text


def test_targets_bound_alike_make_one_sentence_naming_the_scale() -> None:
    """Seed 004's versions, all lock-bound at the same client counts: one finding,
    not one line per version and client count; two scales are told apart."""
    records = []
    for target in ("pg15", "pg18"):
        for clients in (4, 8):
            records += watched(runs(target, [100.0, 110.0], clients=clients), ["lock", "lock"])
    records += watched(runs("pg15", [90.0, 95.0], clients=4, scale=10), ["cpu", "cpu"])
    (only,) = c.wait_bound(evidence(records))
    assert only.text.startswith("pg15, pg18: TPC-B read-write, scale 1 at 4 and 8 clients")
    assert "8 of 8 run(s)" in only.text


def test_one_read_bound_run_of_three_is_no_conclusion() -> None:
    records = watched(runs("big", [100.0, 110.0, 105.0]), ["read", "cpu", "cpu"])
    assert c.wait_bound(evidence(records)) == []


# -- client-bound -------------------------------------------------------------


def test_a_load_host_out_of_cpu_is_said_before_the_tps_is_quoted() -> None:
    """A remote target's every run client-bound (the load host's CPUs full): the
    report said "No rule drew a conclusion", as if the tps were the server's."""
    records = watched(runs("db1", [35598.0, 32938.0], clients=2), ["client_host"] * 2)
    records += watched(runs("local", [100.0, 110.0], clients=8), ["client", "cpu"])
    first, second = c.client_bound(evidence(records))
    assert first.text.startswith(
        "db1: TPC-B read-write at 2 clients measured the load generator, not the server"
    )
    assert "a load host ran out of CPU in 2 of 2 run(s)" in first.text
    assert "local: TPC-B read-write at 8 clients" in second.text
    assert "pgbench, the load generator, was saturated in 1 of 2 run(s)" in second.text
    assert c.wait_bound(evidence(records)) == []


def test_one_client_bound_run_of_three_is_no_conclusion() -> None:
    records = watched(runs("db1", [100.0, 110.0, 105.0]), ["client_host", "cpu", "cpu"])
    assert c.client_bound(evidence(records)) == []


# -- vm-wakeup ----------------------------------------------------------------


def test_vm_wakeup_named_on_a_vm() -> None:
    records = runs("local", [11285.0], clients=1, latency=0.088)
    records += runs("local", [128158.0], clients=2, latency=0.015)
    (only,) = c.vm_wakeup(evidence(records, environment=env("KVM")))
    assert "pays for the virtual machine (KVM)" in only.text
    assert "11,285 tps against 128,158 at 2 clients (11.4x" in only.text


def test_no_wakeup_on_bare_metal_or_a_linear_curve() -> None:
    steep = runs("local", [11285.0], clients=1) + runs("local", [128158.0], clients=2)
    assert c.vm_wakeup(evidence(steep, environment=env(None))) == []
    linear = runs("local", [10000.0], clients=1) + runs("local", [19000.0], clients=2)
    assert c.vm_wakeup(evidence(linear, environment=env("KVM"))) == []


# -- disturbed ----------------------------------------------------------------


def test_disturbed_runs_are_said_first() -> None:
    from pgrig.monitor.model import Disturbance

    records = watched(runs("a", [100.0, 110.0]), ["cpu", "cpu"])
    quiet = c.draw(evidence(records))
    assert all(x.rule != "disturbed" for x in quiet)
    mon = next(r for r in records if r.kind == "monitor")
    base = from_dict(MonitorResult, mon.result or {})
    hog = Disturbance(("cpuhog 46%",), 46.0, None, (), 10.0, 0.5)
    busy = dataclasses.replace(base, disturbed=hog)
    records = [dataclasses.replace(mon, result=to_dict(busy)) if r is mon else r for r in records]
    first = c.draw(evidence(records))[0]
    assert first.rule == "disturbed" and first.text.startswith("1 of 2 monitored runs shared")


def test_a_failed_load_is_said_before_any_comparison() -> None:
    records = runs("a", [100.0, 110.0]) + runs("b", [100.0, 104.0])
    assert all(x.rule != "failed" for x in c.draw(evidence(records)))
    load = dataclasses.replace(
        record("b", "tpcb/s1/init", "pgbench_init", run(1.0)),
        status="failed",
        result=None,
        reason="pgbench -i exited 1: ERROR:  could not extend file\nmore detail",
    )
    first = c.draw(evidence([*records, load]))[0]
    assert first.rule == "failed"
    assert first.text.startswith("1 step failed on b: b/tpcb/s1/init (pgbench -i exited 1: ")
    assert "more detail" not in first.text, "the first line of the reason only"
    many = [dataclasses.replace(load, key=f"b/tpcb/s{i}/init") for i in range(5)]
    text = c.draw(evidence([*records, *many]))[0].text
    assert text.startswith("5 steps failed on b:") and "; 2 more." in text


def test_an_oom_killed_load_keeps_its_cause_not_its_progress_lines() -> None:
    """The issue's study: an OOM-killed pgbench -i concluded with "...(100%) done
    (elap..." - pgbench's progress, the kill cut off after it."""
    records = runs("a", [100.0, 110.0]) + runs("b", [100.0, 104.0])
    stderr = (MONITOR_DATA.parent / "pgbench_init_s2_client.stderr.txt").read_text()
    stderr = stderr[: stderr.index("vacuuming")]  # killed while generating
    error = ToolError("pgbench -i failed", returncode=-9, stderr=stderr)
    reason = str(error) + (
        "; the kernel OOM-killed 1 process(es) in the target's memory cgroup (256 MiB) "
        "during this step: give the target more memory, or lower shared_buffers, "
        "maintenance_work_mem or work_mem"
    )  # as pgrig.recorder._oom_note words it
    assert "done (elapsed" in reason
    load = dataclasses.replace(
        record("b", "tpcb/s2/init", "pgbench_init", run(1.0)),
        status="failed", result=None, reason=reason,
    )  # fmt: skip
    first = c.draw(evidence([*records, load]))[0]
    assert first.rule == "failed"
    assert "done (elapsed" not in first.text and "(100%)" not in first.text
    assert "pgbench -i failed (killed by SIGKILL)" in first.text
    assert (
        "the kernel OOM-killed 1 process(es) in the target's memory cgroup (256 MiB)" in first.text
    )


# -- io-cap -------------------------------------------------------------------


def capped(target: str, write_iops: int, fio_iops: float, fsync_ops: float) -> list[RunRecord]:
    from pgrig.results import FioResult
    from pgrig.storage.model import LabInfo
    from pgrig.storage.throttle import IoLimits

    lab = LabInfo("ESSD", "/var/tmp", io=IoLimits(write_iops, write_iops, label="ESSD"))
    fio = FioResult("randwrite", "8k", "libaio", True, 1, 8, "64M", 5.0, fio_iops, 300.0,
                    100.0, 90.0, 200.0, 400.0)  # fmt: skip
    return [
        record(target, "lab", "storage_lab", lab),
        record(target, "fio/randwrite", "fio", fio, pattern="randwrite"),
        record(target, "probe/pg_test_fsync", "pg_test_fsync", fsync(1e6 / fsync_ops)),
    ]


def test_a_cap_above_the_disk_never_bound_and_fsync_at_half_the_cap() -> None:
    pl3 = c.io_cap(evidence(capped("essd-pl3", 91_800, 46_520.0, 9_000.0)))
    (only,) = pl3
    assert only.text.startswith("essd-pl3: the cap of 91,800 IOPS never bound: fio 8k randwrite")
    assert "51% of the cap" in only.text
    pl1 = c.io_cap(evidence(capped("essd-pl1", 6_800, 6_750.0, 3_346.0)))
    assert [x.text.split(":")[1].strip() for x in pl1] == [
        "the cap of 6,800 IOPS bound",
        "fdatasync ran 3,346 ops/s, half the cap of 6,800 write IOPS",
    ]


def test_no_cap_no_io_conclusion() -> None:
    records = [r for r in capped("local", 6_800, 6_750.0, 3_346.0) if r.kind != "storage_lab"]
    assert c.io_cap(evidence(records)) == []


def test_no_wakeup_when_the_monitor_saw_busy_cpus() -> None:
    """The monitor's samples (tests/data/monitor) hold the CPUs' idle share: busy CPUs
    at 1 client wake nothing, idle ones are cited."""
    steep = runs("local", [11285.0], clients=1) + runs("local", [128158.0], clients=2)
    one = [r for r in steep if r.params["clients"] == 1]
    data = json.loads((MONITOR_DATA / "result_storage_read.json").read_text())
    base = from_dict(MonitorResult, data["monitor"])

    def at(idle: float) -> list[RunRecord]:
        samples = tuple(
            dataclasses.replace(s, cpu=dataclasses.replace(s.cpu, idle=idle, iowait=0.0))
            for s in base.samples
        )
        mon = dataclasses.replace(base, samples=samples)
        return steep + [
            dataclasses.replace(r, key=r.key + "/monitor", kind="monitor", result=to_dict(mon))
            for r in one
        ]

    assert c.vm_wakeup(evidence(at(20.0), environment=env("KVM"))) == []
    (idle,) = c.vm_wakeup(evidence(at(75.0), environment=env("KVM")))
    assert "(the monitor: CPUs 25% busy at 1 client)" in idle.text


# -- durable ------------------------------------------------------------------


def crashed(lost: int, failures: tuple[str, ...] = ()) -> list[RunRecord]:
    checks = (Check("one session row per user (no duplicate key)", not failures, ""),)
    crashes = tuple(
        Crash(i, "immediate", "2026-11-25T00:00:00+00:00", 5.0, 500, 2, 3.0, 2.5 + i,
              checks=checks)
        for i in (1, 2, 3)
    )  # fmt: skip
    result = DurabilityResult("immediate", 2, 3, 5.0, 1, "15.18", crashes=crashes,
                              acknowledged=1504, lost=lost, failures=failures)  # fmt: skip
    return [record("disk", "login-crash", "durability", result, workload="login-crash")]


def test_a_crash_check_says_what_was_lost_and_whether_the_checks_held() -> None:
    """Seed 001 crashed its login workload and looked for lost rows and duplicates."""
    (held,) = durable(evidence(crashed(0)))
    assert held.text == (
        "disk: login-crash, 3 x immediate: 1,504 commits acknowledged, 0 lost; its "
        "check held after every recovery (the slowest recovery 5.5 s)."
    )
    (failed,) = durable(evidence(crashed(7, ("7 acknowledged commits lost",))))
    assert "7 lost; FAILED: 7 acknowledged commits lost" in failed.text
    # seed001-login: a pass that did not test open_datasync keeps that flag
    (rec,) = crashed(0)
    res = from_dict(DurabilityResult, rec.result)
    untested = ("wal_sync_method = open_datasync: which sync call makes WAL durable matters "
                "only when the page cache is lost",)  # fmt: skip
    rec = dataclasses.replace(rec, result=to_dict(dataclasses.replace(res, untested=untested)))
    (held,) = durable(evidence([rec]))
    assert held.text.endswith(
        "NOT TESTED by this process crash: wal_sync_method = open_datasync: which sync call "
        "makes WAL durable matters only when the page cache is lost."
    )


def test_no_crash_check_no_durability_sentence() -> None:
    assert durable(evidence(runs("a", [1000, 1010]) + loads("a", [10.0]))) == []


def test_a_cap_the_uncapped_disk_does_not_reach_is_not_said_to_bind() -> None:
    """seed000 on a busy disk: essd-pl1's fio at 93% of its 6,800 IOPS, the uncapped
    local beside it at 6,029 (89%): "the cap bound" could not be told."""
    local = [r for r in capped("local", 6_800, 6_029.0, 226.0) if r.kind != "storage_lab"]
    found = c.io_cap(evidence(local + capped("essd-pl1", 6_800, 6_303.0, 208.0)))
    (only,) = [x for x in found if "fio" in x.text]
    assert "whether the cap of 6,800 IOPS bound cannot be told" in only.text
    assert "uncapped local reached 6,029 (89%)" in only.text and " bound:" not in only.text
    fast = [r for r in capped("local", 6_800, 25_500.0, 226.0) if r.kind != "storage_lab"]
    found = c.io_cap(evidence(fast + capped("essd-pl1", 6_800, 6_303.0, 208.0)))
    assert [x.text for x in found if "fio" in x.text][0].startswith(
        "essd-pl1: the cap of 6,800 IOPS bound"
    )


def test_a_tpcc_pair_whose_every_run_separates_is_never_no_difference() -> None:
    """Issue 39: synchronous_commit off vs on, 2 warehouses, 4 connections, 15 s x 3.
    The runs' figures as the trial reported them (each side's range and median:
    off 38,785-63,066, median 60,235; on 23,871-30,240, median 27,463): the first
    screen said "no difference ... p=0.07" beside an interval of +28.3 to +164.2%."""
    records = [
        *tpcc("a-sync-on", [23871, 27463, 30240], mode="server", active=2),
        *tpcc("b-sync-off", [38785, 60235, 63066], mode="server", active=2),
    ]
    (only,) = c.headline(evidence(records))  # the baseline: a-sync-on
    assert "no difference" not in only.text and "within noise" not in only.text
    found = re.search(r"b-sync-off vs a-sync-on ▲ \+(\d+)\.\d% \(95% CI \+(\d+)\.\d to", only.text)
    assert found is not None, only.text
    assert int(found.group(2)) > 0 and int(found.group(1)) > 50
