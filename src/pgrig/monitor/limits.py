"""The physical limits a run is compared with, from the study's own probes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgrig import stats
from pgrig.monitor.model import Limits
from pgrig.results import FioResult, FsyncResult


def limits_from(results: Iterable[object]) -> Limits | None:
    """Limits from the typed results of the probes (``FioResult``, ``FsyncResult``):
    8k randread / randwrite IOPS and pg_test_fsync's fdatasync of one 8kB write,
    each the median of its repeats - the figure the report's headline shows (the
    last run's alone once read 1,088 ops/s beside a median of 6,847). None when
    no probe result is among them."""
    randread: list[float] = []
    randwrite: list[float] = []
    fdatasync: list[float] = []
    for res in results:
        if isinstance(res, FioResult) and res.block_size == "8k":
            if res.pattern == "randread":
                randread.append(res.iops)
            elif res.pattern == "randwrite":
                randwrite.append(res.iops)
        elif isinstance(res, FsyncResult):
            for row in res.rows:
                if row.method == "fdatasync" and "one 8kb write" in row.section.lower():
                    if row.ops_per_sec is not None:
                        fdatasync.append(row.ops_per_sec)
                    break
    if not (randread or randwrite or fdatasync):
        return None
    return Limits(
        randread_iops=_median(randread),
        randwrite_iops=_median(randwrite),
        fdatasync_ops=_median(fdatasync),
    )


def _median(values: list[float]) -> float | None:
    return stats.headline(values) if values else None


WAL_SYNCS = "WAL syncs (the server's, pg_stat_wal)"  # how the verdict's line starts


def wal_syncs_line(syncs: Sequence[float], fdatasync_ops: float) -> str:
    """The run's WAL syncs per second (median, peak) against pg_test_fsync's
    fdatasync ops/s: "Against the probes" in the monitor's details."""
    med, peak = stats.headline(syncs), max(syncs)
    return (
        f"{WAL_SYNCS}: {_num(med)}/s median, {_num(peak)} peak = "
        f"{100 * med / fdatasync_ops:.0f}% / {100 * peak / fdatasync_ops:.0f}% of the "
        f"{_num(fdatasync_ops)} fdatasync ops/s pg_test_fsync measured"
    )


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.1f}"
