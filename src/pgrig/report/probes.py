"""Report sections of the storage probes: pg_test_timing, pg_test_fsync, fio."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig.registry import typed_result
from pgrig.report import fmt
from pgrig.report.model import HEADLINE, NORMAL, Row, Section, Table
from pgrig.report.status import status_row
from pgrig.results import Environment, FioResult, FsyncResult, FsyncRow, RunRecord, TimingResult

FIO_ORDER = ("randwrite", "randread", "write", "read")
FIO_LABELS = {
    "randwrite": "random write",
    "randread": "random read",
    "write": "sequential write",
    "read": "sequential read",
}
HEADLINE_FSYNC = "fdatasync 8K"


def fio_order(rec: RunRecord) -> int:
    pattern = str(rec.params.get("pattern", ""))
    return FIO_ORDER.index(pattern) if pattern in FIO_ORDER else len(FIO_ORDER)


# --------------------------------------------------------------------------
# pg_test_timing


def timing_section(records: Sequence[RunRecord], env: Environment | None) -> Section:
    title, anchor = "Clock timing overhead (pg_test_timing)", "timing"
    if not records:
        return Section(title, anchor, ("Not run in this study.",))
    paragraphs: list[str] = []
    blocks: list[Table] = []
    clock = env.clocksource if env is not None else None
    for rec in records:
        res: TimingResult | None = typed_result(rec)
        if res is None:
            blocks.append(
                Table(
                    ("Test Case", "Result"),
                    (status_row("pg_test_timing", rec, 2),),
                )
            )
            continue
        paragraphs.append(
            f"Per loop time including overhead: {res.per_loop_ns:.2f} ns "
            f"(measured for {res.duration_s:g} s" + (f", clocksource {clock})." if clock else ").")
        )
        rows = tuple(
            Row((f"< {b.lt_us}", f"{b.percent:.5f}", fmt.integer(b.count))) for b in res.histogram
        )
        blocks.append(
            Table(
                ("Duration (us)", "% of total", "Count"),
                rows,
                caption="Histogram of timing durations",
                numeric=(True, True, True),
            )
        )
    return Section(title, anchor, tuple(paragraphs), tuple(blocks))


# --------------------------------------------------------------------------
# pg_test_fsync


def fsync_headline(res: FsyncResult) -> FsyncRow | None:
    """fdatasync of one 8kB write: the commit cost seed 000 compares across disks."""
    for row in res.rows:
        if row.method == "fdatasync" and "one 8kb write" in row.section.lower():
            return row
    return next((row for row in res.rows if row.method == "fdatasync"), None)


def fsync_section(records: Sequence[RunRecord], target: str) -> Section:
    title, anchor = "WAL sync methods (pg_test_fsync)", "fsync"
    if not records:
        return Section(title, anchor, ("Not run in this study.",))
    columns = ("Test Case", "Method", "ops/s", "usecs/op")
    numeric = (False, False, True, True)
    blocks = []
    for rec in records:
        res: FsyncResult | None = typed_result(rec)
        if res is None:
            rows = (status_row(HEADLINE_FSYNC, rec, 4),)
            blocks.append(Table(columns, rows, numeric=numeric))
            continue
        table_rows = []
        head = fsync_headline(res)
        if head is not None:
            table_rows.append(_fsync_row(HEADLINE_FSYNC, head, HEADLINE))
        table_rows += [_fsync_row(r.section, r) for r in res.rows]
        blocks.append(
            Table(
                columns,
                tuple(table_rows),
                caption=f"Target: {target}; {res.seconds_per_test:g} s per test",
                numeric=numeric,
                notes=("n/a: the method is not supported on this platform.",)
                if any(r.ops_per_sec is None for r in res.rows)
                else (),
            )
        )
    return Section(title, anchor, blocks=tuple(blocks))


def _fsync_row(label: str, row: FsyncRow, kind: str = NORMAL) -> Row:
    method = row.method if kind != HEADLINE else f"{row.method} ({row.section})"
    return Row(
        (
            label,
            method,
            fmt.optional(row.ops_per_sec, lambda v: f"{v:,.3f}"),
            fmt.optional(row.usecs_per_op, fmt.integer),
        ),
        kind,
    )


# --------------------------------------------------------------------------
# fio


def fio_label(rec: RunRecord, res: FioResult | None) -> str:
    pattern = res.pattern if res is not None else str(rec.params.get("pattern", rec.key))
    block = res.block_size if res is not None else str(rec.params.get("block_size", "8k"))
    return f"{block} {FIO_LABELS.get(pattern, pattern)}"


def fio_section(records: Sequence[RunRecord], target: str) -> Section:
    title, anchor = "Storage IOPS and throughput (fio)", "fio"
    if not records:
        return Section(title, anchor, ("Not run in this study.",))
    columns = (
        "Test Case",
        "IOPS",
        "MiB/s",
        "clat mean (us)",
        "clat p50 (us)",
        "clat p99 (us)",
        "clat p99.9 (us)",
    )
    rows: list[Row] = []
    jobs: dict[str, list[str]] = {}
    for rec in records:
        res: FioResult | None = typed_result(rec)
        label = fio_label(rec, res)
        if res is None:
            rows.append(status_row(label, rec, len(columns)))
            continue
        rows.append(
            Row(
                (
                    label,
                    f"{fmt.si(res.iops)} ({fmt.integer(res.iops)})",
                    fmt.rate(res.bandwidth_mib_s),
                    fmt.us(res.clat_mean_us),
                    fmt.us(res.clat_p50_us),
                    fmt.us(res.clat_p99_us),
                    fmt.us(res.clat_p999_us),
                )
            )
        )
        jobs.setdefault(fio_job_text(res), []).append(label)
    notes = []
    for text, labels in jobs.items():
        prefix = "Job parameters" if len(jobs) == 1 else f"Job parameters of {', '.join(labels)}"
        notes.append(f"{prefix}: {text}.")
    notes.append("clat: completion latency as fio reports it, from submission to completion.")
    table = Table(
        columns,
        tuple(rows),
        caption=f"Target: {target}",
        notes=tuple(notes),
        numeric=(False,) + (True,) * (len(columns) - 1),
    )
    return Section(title, anchor, blocks=(table,))


def fio_job_text(res: FioResult) -> str:
    text = (
        f"bs={res.block_size}, ioengine={res.ioengine}, direct={int(res.direct)}, "
        f"numjobs={res.numjobs}, iodepth={res.iodepth}, size={res.size} per job, "
        f"runtime {res.runtime_s:g} s"
    )
    return text + (f" ({res.fio_version})" if res.fio_version else "")


# --------------------------------------------------------------------------
# Every run, as the store recorded it
