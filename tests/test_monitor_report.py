"""The monitor's report section and the verdict rules that need a shape no real
run here produces on demand (stalls), on a MonitorResult captured from a real
storage-read-bound run (tests/data/monitor/result_storage_read.json:
select-only, 4 clients, 256 kB shared_buffers, page cache evicted)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pgrig.document import model
from pgrig.monitor import verdict
from pgrig.monitor.model import Checkpoint, IoSample, MemorySample, MonitorResult, Sample
from pgrig.registry import result_type
from pgrig.report import monitor as monitor_section
from pgrig.report import writer as report
from pgrig.report.samples import Columns
from pgrig.results import PgbenchRun, RunRecord, Study, from_dict, to_dict

DATA = Path(__file__).parent / "data" / "monitor"
KEY = "tpcb/run/select-only/c4"


def captured() -> tuple[MonitorResult, PgbenchRun]:
    data = json.loads((DATA / "result_storage_read.json").read_text())
    return from_dict(MonitorResult, data["monitor"]), from_dict(PgbenchRun, data["run"])


def record(key: str, kind: str, result: object | None, status: str = "ok") -> RunRecord:
    return RunRecord(
        study="s",
        key=key,
        kind=kind,
        target="/var/tmp",
        params={"clients": 4},
        status=status,
        started_at="2026-11-22T05:00:00+00:00",
        finished_at="2026-11-22T05:00:10+00:00",
        result=to_dict(result) if result is not None else None,
        reason=None if status == "ok" else "pgbench failed (exit code 2)",
    )


STUDY = Study(id="s", name="quick", target="/var/tmp", started_at="x", status="finished")


def test_captured_result_round_trips_as_kind_monitor() -> None:
    mon, _ = captured()
    assert result_type("monitor") is MonitorResult
    assert from_dict(MonitorResult, to_dict(mon)) == mon
    assert mon.verdict.cause == "read"
    inside = [s for s in mon.samples if s.in_run]
    assert len(inside) >= 6 and all(s.pg is not None for s in inside)


def test_verdict_is_recomputed_from_the_stored_samples() -> None:
    """A result stored before interference was attributed (no ``others``, no
    ``io``) still reads, and gives the same cause; device figures are now
    labelled device-wide."""
    mon, run = captured()
    assert mon.others is None and mon.disturbed is None and mon.noise is None
    assert all(s.io is None and s.cpu.other is None for s in mon.samples)
    again = verdict.decide(mon.samples, mon.checkpoints, None, run)
    assert (again.cause, again.label) == (mon.verdict.cause, mon.verdict.label)
    assert "vda (device-wide) 52% busy" in again.summary


def test_section_has_a_verdict_row_per_run_and_a_failed_row() -> None:
    mon, run = captured()
    records = [
        record(KEY, "pgbench_run", run),
        record(KEY + "/monitor", "monitor", mon),
        record("tpcb/run/read-write/c4/monitor", "monitor", None, status="failed"),
    ]
    sec = monitor_section.section(STUDY, records)
    assert sec is not None
    verdicts = sec.blocks[0]
    assert isinstance(verdicts, model.Table)
    first, second = verdicts.rows
    assert first.cells[0] == KEY
    assert first.cells[1].startswith("storage-read bound: ")
    assert "IO:DataFileRead" in first.cells[1] and "hit ratio" in first.cells[1]
    assert second.kind == "failed" and "pgbench failed" in second.cells[1]
    names = [b.name for b in sec.blocks if isinstance(b, model.Figure)]
    slug = "tpcb_run_select_only_c4"
    assert names == [f"monitor_{slug}_{k}" for k in ("tps", "waits", "cpu", "device")]


def test_section_is_absent_without_monitor_records() -> None:
    _, run = captured()
    assert monitor_section.section(STUDY, [record(KEY, "pgbench_run", run)]) is None


def test_stacked_waits_end_at_100_percent() -> None:
    mon, _ = captured()
    fig = monitor_section.waits_figure("x", "x", Columns(mon.samples))
    top = fig.series[-1]
    assert all(y == pytest.approx(100.0) for y in top.y)
    assert fig.series[0].label == "IO:DataFileRead"


def test_report_files_carry_the_section_and_its_plots(tmp_path: Path) -> None:
    mon, run = captured()
    checkpointed = dataclasses.replace(
        mon, checkpoints=(Checkpoint(start_s=2.0, end_s=3.5, completed=True),)
    )
    records = [record(KEY, "pgbench_run", run), record(KEY + "/monitor", "monitor", checkpointed)]
    md_path, html_path = report.write(STUDY, records, tmp_path)
    md = md_path.read_text()
    assert "## Bottlenecks (host and server monitoring)" in md
    assert "storage-read bound: " in md
    # Per-run plots are folded away: in the HTML only, the Markdown says so.
    assert "*Plots in the HTML report: TPS and checkpoints, " in md
    html = html_path.read_text()
    assert 'id="fig-monitor_tpcb_run_select_only_c4_waits"' in html
    assert "checkpoint start / end" in html


# --------------------------------------------------------------------------
# Rules on shapes: stalls, no samples


def _with_dips(
    mon: MonitorResult, dips: set[int], checkpoint: bool, server_writes: float | None = None
) -> list[Sample]:
    """Dips in tps at ``dips``; without a checkpoint, a Writeback peak there. With
    ``server_writes``, every sample says the server itself wrote that many MiB/s
    of the 10 MiB/s written to the device."""
    out = []
    for i, s in enumerate(mon.samples):
        if i in dips:
            mem = s.memory or MemorySample(0, 0, 0, 0)
            s = dataclasses.replace(
                s,
                tps=(s.tps or 1000.0) * 0.1,
                memory=dataclasses.replace(mem, writeback_mib=500.0) if not checkpoint else mem,
            )
        if server_writes is not None:
            io = IoSample("vda", device_write_mib_s=10.0, server_write_mib_s=server_writes)
            s = dataclasses.replace(s, io=io)
        out.append(s)
    return out


def test_stalls_aligned_with_a_checkpoint_win() -> None:
    mon, run = captured()
    samples = _with_dips(mon, {3, 4}, checkpoint=True)
    ckpt = (Checkpoint(start_s=samples[2].t_s, end_s=samples[4].t_s, completed=True),)
    v = verdict.decide(samples, ckpt, None, run)
    assert v.cause == "stalls", v
    assert "2 of the dips during a checkpoint" in v.summary
    assert any(line.startswith("storage-read bound") for line in v.secondary)


def test_stalls_aligned_with_writeback_peaks_of_the_servers_own_writes_win() -> None:
    mon, run = captured()
    samples = _with_dips(mon, {2, 5}, checkpoint=False, server_writes=9.0)
    v = verdict.decide(samples, (), None, run)
    assert v.cause == "stalls", v
    assert "Writeback up to 500 MiB" in v.summary
    assert "the server wrote 90% of the bytes written to the device" in v.summary


def test_writeback_peaks_of_other_processes_are_not_the_servers_stalls() -> None:
    """The issue's case: dips during a host-wide Dirty/Writeback peak, no
    checkpoint, and the server wrote nothing: other processes' writeback."""
    mon, run = captured()
    for server_writes in (0.0, None):  # none, or not known: not the server's evidence
        samples = _with_dips(mon, {2, 5}, checkpoint=False, server_writes=server_writes)
        v = verdict.decide(samples, (), None, run)
        assert v.cause == "read", v
        assert not any(line.startswith("checkpoint") for line in v.secondary)


def test_dips_without_a_cause_are_not_called_stalls() -> None:
    mon, run = captured()
    samples = [
        dataclasses.replace(s, tps=(s.tps or 1000.0) * 0.1) if i in {2, 5} else s
        for i, s in enumerate(mon.samples)
    ]
    assert verdict.decide(samples, (), None, run).cause == "read"


def test_too_few_samples_give_no_verdict() -> None:
    mon, run = captured()
    v = verdict.decide(mon.samples[:1], (), None, run)
    assert v.cause == "unknown" and "at least 2 needed" in v.summary


def test_limits_compare_reads_and_syncs_with_the_probes() -> None:
    from pgrig.monitor.model import Limits

    mon, run = captured()
    v = verdict.decide(mon.samples, (), Limits(randread_iops=20000.0, fdatasync_ops=9456.0), run)
    reads = next(line for line in v.against_limits if line.startswith("device-wide reads"))
    assert "on vda (every process)" in reads
    assert "of the 20,000 IOPS fio measured" in reads
    assert any("9,456 fdatasync ops/s" in line for line in v.against_limits)


def test_limits_from_the_studys_probes() -> None:
    from pgrig.monitor import limits_from
    from pgrig.tools import fio, pg_test_fsync

    data = Path(__file__).parent / "data"
    fsync = pg_test_fsync.parse((data / "pg_test_fsync_pg15.txt").read_text())
    randread = fio.parse(
        (data / "fio_randread.json").read_text(), fio.FioJob(Path("/var/tmp"), "randread")
    )
    limits = limits_from([fsync, randread])
    assert limits is not None
    assert limits.fdatasync_ops == pytest.approx(9456.187)
    assert limits.randread_iops == randread.iops and limits.randwrite_iops is None
    assert limits_from([]) is None


def test_limits_are_the_median_of_repeated_probes() -> None:
    """Issue 30: 'Against the probes' read the third run's 1,088 fdatasync ops/s
    while the headline median was 6,847; the limits are the repeats' median now."""
    from dataclasses import replace

    from pgrig.monitor import limits_from
    from pgrig.tools import pg_test_fsync

    data = Path(__file__).parent / "data"
    parsed = pg_test_fsync.parse((data / "pg_test_fsync_pg15.txt").read_text())

    def with_fdatasync(ops: float) -> pg_test_fsync.FsyncResult:
        rows = tuple(
            replace(r, ops_per_sec=ops)
            if r.method == "fdatasync" and "one 8kb write" in r.section.lower()
            else r
            for r in parsed.rows
        )
        return replace(parsed, rows=rows)

    limits = limits_from([with_fdatasync(v) for v in (6847.0, 9012.0, 1088.0)])
    assert limits is not None and limits.fdatasync_ops == 6847.0


def test_against_the_probes_uses_the_headlines_median() -> None:
    """Issue 30: the quick study's "Against the probes" read the third run's 1,088
    fdatasync ops/s while its headline median was 6,847. A verdict stored so is
    shown against the median of the study's pg_test_fsync runs."""
    from dataclasses import replace

    from pgrig.monitor.model import Limits
    from pgrig.tools import pg_test_fsync

    mon, run = captured()
    stored = replace(
        mon, verdict=verdict.decide(mon.samples, (), Limits(fdatasync_ops=1088.0), run)
    )
    assert any("1,088 fdatasync ops/s" in a for a in stored.verdict.against_limits)
    parsed = pg_test_fsync.parse(
        (Path(__file__).parent / "data" / "pg_test_fsync_pg15.txt").read_text()
    )

    def fsync(i: int, ops: float) -> RunRecord:
        rows = tuple(
            dataclasses.replace(r, ops_per_sec=ops)
            if r.method == "fdatasync" and "one 8kb write" in r.section.lower()
            else r
            for r in parsed.rows
        )
        return record(f"probes/fsync/r{i}", "pg_test_fsync", dataclasses.replace(parsed, rows=rows))

    records = [
        fsync(1, 6847.0),
        fsync(2, 9012.0),
        fsync(3, 1088.0),
        record(KEY, "pgbench_run", run),
    ]
    records.append(record(KEY + "/monitor", "monitor", stored))
    sec = monitor_section.section(STUDY, records)
    assert sec is not None
    notes = [n for b in sec.blocks if isinstance(b, model.Table) for n in b.notes]
    (against,) = [n for n in notes if n.startswith("Against the probes")]
    assert "of the 6,847 fdatasync ops/s pg_test_fsync measured" in against
    assert "1,088" not in against


def test_wal_writes_that_sync_themselves_are_not_zero_syncs() -> None:
    """seed001-login syncs with open_datasync: pg_stat_wal counts no wal_sync, and
    the table printed "0.0 WAL syncs/s" beside a WAL-bound verdict."""
    data = json.loads((DATA / "result_storage_read.json").read_text())
    mon = from_dict(MonitorResult, data["monitor"])
    samples = tuple(
        dataclasses.replace(s, pg=dataclasses.replace(s.pg, wal_syncs_s=0.0, wal_writes_s=850.0))
        for s in mon.samples
        if s.pg is not None
    )
    table = monitor_section.medians_table("run", mon, Columns(samples, mon.devices))
    rows = {r.cells[0]: r.cells[1] for r in table.rows}
    assert rows["WAL syncs/s"].startswith("none counted: each WAL write syncs itself")
    assert rows["WAL writes/s (each a sync)"] == "850"
    # fdatasync's own syncs are counted as they were
    synced = tuple(dataclasses.replace(s, pg=dataclasses.replace(s.pg, wal_syncs_s=400.0))
                   for s in samples if s.pg is not None)  # fmt: skip
    table = monitor_section.medians_table("run", mon, Columns(synced, mon.devices))
    assert {r.cells[0]: r.cells[1] for r in table.rows}["WAL syncs/s"] == "400"
