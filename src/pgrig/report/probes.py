"""Report sections of the storage probes: pg_test_timing, pg_test_fsync, fio."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pgrig.document import fmt
from pgrig.document.model import HEADLINE, NOISY, NORMAL, Row, Section, Table
from pgrig.monitor import noise
from pgrig.probe import FIO, FSYNC, TIMING
from pgrig.report.index import StudyIndex
from pgrig.report.status import status_kind, status_row, status_text
from pgrig.report.storage import flag
from pgrig.results import Environment, FioResult, FsyncResult, FsyncRow, RunRecord, TimingResult
from pgrig.tools import pg_test_fsync

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


def timing_section(study: StudyIndex, env: Environment | None) -> Section:
    """pg_test_timing's runs of the study (of one target: its index)."""
    title, anchor = "Clock timing overhead (pg_test_timing)", "timing"
    records = study.kind(TIMING)
    if not records:
        return Section(title, anchor, ("Not run in this study.",))
    paragraphs: list[str] = []
    blocks: list[Table] = []
    clock = env.clocksource if env is not None else None
    for rec in records:
        res = study.result(rec, TimingResult)
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


def fsync_headline(res: FsyncResult, method: str = "fdatasync") -> FsyncRow | None:
    """``method`` (the server's wal_sync_method; fdatasync, Linux's default) of one
    8kB write: the commit cost seed 000 compares across disks."""
    for row in res.rows:
        if row.method == method and "one 8kb write" in row.section.lower():
            return row
    return next((row for row in res.rows if row.method == method), None)


@dataclass(frozen=True)
class FsyncRuns:
    """Every run of pg_test_fsync on one target: each row's median and spread."""

    results: tuple[FsyncResult, ...]
    not_ok: tuple[RunRecord, ...] = ()

    @classmethod
    def of(cls, study: StudyIndex) -> FsyncRuns:
        """The runs of pg_test_fsync in ``study`` (one target's index)."""
        results, not_ok = [], []
        for rec in study.kind(FSYNC):
            res = study.result(rec, FsyncResult)
            if res is None:
                not_ok.append(rec)
            else:
                results.append(res)
        return cls(tuple(results), tuple(not_ok))

    def spread(self, row: FsyncRow) -> fmt.Spread | None:
        """ops/s of this section and method over the runs; None when never measured."""
        values = [
            found.ops_per_sec
            for res in self.results
            if (found := res.find(row.section, row.method)) is not None
            and found.ops_per_sec is not None
        ]
        return fmt.spread(values) if values else None

    def median(self) -> FsyncResult | None:
        """One result holding each row's median over the runs (the first run's rows)."""
        if not self.results:
            return None
        rows = []
        for row in self.results[0].rows:
            ops = self.spread(row)
            usecs = [
                found.usecs_per_op
                for res in self.results
                if (found := res.find(row.section, row.method)) is not None
                and found.usecs_per_op is not None
            ]
            rows.append(
                FsyncRow(
                    row.section,
                    row.method,
                    ops.median if ops is not None else None,
                    statistics.median(usecs) if usecs else None,
                )
            )
        return FsyncResult(self.results[0].seconds_per_test, tuple(rows))

    def inversions(self) -> list[pg_test_fsync.Inversion]:
        median = self.median()
        return pg_test_fsync.inversions(median) if median is not None else []


def fsync_summary(study: StudyIndex) -> Row | None:
    """The summary's 'fdatasync 8K' row: median over the runs (of one target's
    index), with their range."""
    if not study.kind(FSYNC):
        return None
    runs = FsyncRuns.of(study)
    median = runs.median()
    head = fsync_headline(median) if median is not None else None
    if head is None or head.ops_per_sec is None:
        return Row((HEADLINE_FSYNC, status_text(runs.not_ok[0]) if runs.not_ok else "n/a"),
                   status_kind(runs.not_ok[0]) if runs.not_ok else NORMAL)  # fmt: skip
    usecs = fmt.optional(head.usecs_per_op, fmt.integer)
    extra = [f"{usecs} us/op"]
    spread = runs.spread(head)
    if spread is not None and spread.n > 1:
        extra.append(spread.describe())
    text = f"{fmt.rate(head.ops_per_sec)} ops/s ({'; '.join(extra)})"
    if runs.inversions():
        return Row((HEADLINE_FSYNC, text + "; ⚠ noisy, see pg_test_fsync"), NOISY)
    return Row((HEADLINE_FSYNC, text))


UNSYNCED = "non-synced writes"  # pg_test_fsync's section that waits for no flush


def fsync_section(study: StudyIndex, target: str, unsafe: str = "") -> Section:
    """pg_test_fsync's runs in ``study`` (the target's index). ``unsafe``: why
    the target's syncs reach no stable storage ('barriers off
    (nobarrier)', ``report.storage.barriers_off``), said at every figure."""
    title, anchor = "WAL sync methods (pg_test_fsync)", "fsync"
    if not study.kind(FSYNC):
        return Section(title, anchor, ("Not run in this study.",))
    runs = FsyncRuns.of(study)
    median = runs.median()
    repeated = len(runs.results) > 1
    columns = ("Test Case", "Method", "ops/s", "usecs/op") + (
        ("ops/s over the runs",) if repeated else ()
    )
    numeric = (False, False, True, True) + ((True,) if repeated else ())
    rows = [status_row(HEADLINE_FSYNC, rec, len(columns)) for rec in runs.not_ok]
    if median is None:
        return Section(title, anchor, blocks=(Table(columns, tuple(rows), numeric=numeric),))
    inverted = runs.inversions()
    suspect = {(r.section, r.method) for i in inverted for r in (i.expected, i.observed)}

    def row(label: str, found: FsyncRow, kind: str = NORMAL) -> Row:
        cells = _fsync_cells(label, found, kind)
        if repeated:
            spread = runs.spread(found)
            cells += (spread.describe() if spread is not None and spread.n > 1 else "",)
        if kind == NORMAL and (found.section, found.method) in suspect:
            kind = NOISY
            cells = (*cells[:2], f"{cells[2]} ⚠", *cells[3:])
        if found.ops_per_sec is not None and found.section != UNSYNCED:
            cells = (*cells[:2], flag(cells[2], unsafe), *cells[3:])
        return Row(cells, kind)

    head = fsync_headline(median)
    if head is not None:
        rows.append(row(HEADLINE_FSYNC, head, HEADLINE))
    rows += [row(r.section, r) for r in median.rows]
    notes = []
    if any(r.ops_per_sec is None for r in median.rows):
        notes.append("n/a: the method is not supported on this platform.")
    if repeated:
        notes.append(f"Median of {len(runs.results)} runs; the last column: " + fmt.SPREAD_NOTE)
    if inverted:
        worst = max(i.pct for i in inverted)
        notes.append(
            f"⚠ noise, not findings: {len(inverted)} ordering(s) contradict what the tests do - "
            + "; ".join(i.describe() for i in inverted)
            + f". Differences between methods smaller than {worst:.0f}% say nothing about the "
            "methods on this machine: raise the seconds per test, repeat pg_test_fsync "
            "(--fsync-repeat, fsync_repeat in [probes]) or measure on a quiet machine."
        )
    if unsafe:
        notes.append(
            f"⚠ {unsafe}: a sync returns before the data reaches stable storage, so these "
            "rates are not what a durable commit gets from this disk."
        )
    what = f"median of {len(runs.results)} runs" if repeated else "one run"
    caption = f"Target: {target}; {median.seconds_per_test:g} s per test; {what}"
    table = Table(columns, tuple(rows), caption=caption, numeric=numeric, notes=tuple(notes))
    return Section(title, anchor, blocks=(table,))


def _fsync_cells(label: str, row: FsyncRow, kind: str = NORMAL) -> tuple[str, ...]:
    method = row.method if kind != HEADLINE else f"{row.method} ({row.section})"
    return (
        label,
        method,
        f"{row.ops_per_sec:,.3f}" if row.ops_per_sec is not None else "n/a",
        fmt.optional(row.usecs_per_op, fmt.integer),
    )


# --------------------------------------------------------------------------
# fio


def fio_cv(res: FioResult) -> float | None:
    """The coefficient of variation of fio's IOPS samples; None without samples."""
    if res.iops_stddev is None or not res.iops:
        return None
    return res.iops_stddev / res.iops


def fio_noisy(res: FioResult) -> bool:
    cv = fio_cv(res)
    return cv is not None and cv >= noise.HIGH_CV


def fio_spread(res: FioResult) -> str:
    """'6 samples: CV 4.6%, 58.0k–70.0k' (fio's own per-interval IOPS), with ⚠
    when they vary as much as a noisy pgbench run; 'n/a' without samples."""
    cv = fio_cv(res)
    if cv is None or res.iops_min is None or res.iops_max is None:
        return "n/a"
    text = (
        f"{res.iops_samples} samples: CV {100 * cv:.1f}%, "
        f"{fmt.si(res.iops_min)}–{fmt.si(res.iops_max)}"
    )
    return text + (" ⚠" if fio_noisy(res) else "")


def fio_summary(rec: RunRecord, res: FioResult | None) -> Row:
    """The summary's row of one fio job (its result: None when it did not run):
    IOPS as fio prints it, the exact figure, its per-interval spread, and the
    bandwidth."""
    label = fio_label(rec, res)
    if res is None:
        return Row((label, status_text(rec)), status_kind(rec))
    iops = f"IOPS={fmt.si(res.iops)} ({fmt.integer(res.iops)}"
    spread = fio_spread(res)
    iops += f"; {spread})" if spread != "n/a" else ")"
    value = f"{iops}, BW={fmt.rate(res.bandwidth_mib_s)} MiB/s"
    return Row((label, value), NOISY if fio_noisy(res) else NORMAL)


def fio_label(rec: RunRecord, res: FioResult | None) -> str:
    pattern = res.pattern if res is not None else str(rec.params.get("pattern", rec.key))
    block = res.block_size if res is not None else str(rec.params.get("block_size", "8k"))
    return f"{block} {FIO_LABELS.get(pattern, pattern)}"


def fio_section(study: StudyIndex, target: str) -> Section:
    """fio's jobs in ``study`` (the target's index), in fio's order."""
    title, anchor = "Storage IOPS and throughput (fio)", "fio"
    records = sorted(study.kind(FIO), key=fio_order)
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
        "IOPS over the run",
    )
    rows: list[Row] = []
    jobs: dict[str, list[str]] = {}
    for rec in records:
        res = study.result(rec, FioResult)
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
                    fio_spread(res),
                ),
                NOISY if fio_noisy(res) else NORMAL,
            )
        )
        jobs.setdefault(fio_job_text(res), []).append(label)
    notes = []
    for text, labels in jobs.items():
        prefix = "Job parameters" if len(jobs) == 1 else f"Job parameters of {', '.join(labels)}"
        notes.append(f"{prefix}: {text}.")
    notes.append("clat: completion latency as fio reports it, from submission to completion.")
    notes.append(
        "IOPS over the run: fio's own IOPS samples (one per 500 ms), their coefficient of "
        f"variation and range; ⚠ from a CV of {100 * noise.HIGH_CV:.0f}%: the device's "
        "speed swung during the run (other I/O, a cache filling, throttling) - run fio longer "
        "(--fio-runtime, runtime in [probes.fio]) or on a quiet machine."
    )
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
    if res.cpus_allowed:
        text += f", cpus_allowed={res.cpus_allowed} (a CPU per job)"
    return text + (f" ({res.fio_version})" if res.fio_version else "")


# --------------------------------------------------------------------------
# Every run, as the store recorded it
