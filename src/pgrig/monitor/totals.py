"""A run's totals from its samples: the server's counters summed over the
seconds inside pgbench's timed window, which is the before/after delta of each
counter over that window (each sample is the delta since the previous one).

pgbench's own setup (its VACUUM of the branches and tellers, the connections)
and whatever follows the run fall outside the window, so a WAL byte here is one
the measured transactions wrote, give or take the sampler's own commit a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pgrig.monitor.model import DeviceSample, RunTotals, Sample
from pgrig.monitor.pgstats import MIB


class _Sum:
    """A counter's rate times each sample's interval, summed as the samples pass
    (the spool streams them: a run of hours is never all in memory); None once a
    sample lacks it."""

    def __init__(self, part: Callable[[Sample], float | None]) -> None:
        self.part = part
        self.total: float | None = 0.0

    def add(self, s: Sample) -> None:
        value = self.part(s)
        if value is None or self.total is None:
            self.total = None
        else:
            self.total += value * s.interval_s


def _devices(s: Sample, part: Callable[[DeviceSample], float]) -> float | None:
    return sum(part(d) for d in s.devices) if s.devices else None


def run_totals(samples: Iterable[Sample], ncpu: int) -> RunTotals | None:
    """The in-run samples' counters summed; None without server samples in the run."""
    seconds = commits = 0.0
    checkpoints = 0
    sums = {
        "wal_bytes": _Sum(lambda s: s.pg.wal_mib_s * MIB if s.pg and s.pg.wal_mib_s is not None
                          else None),
        "wal_syncs": _Sum(lambda s: s.pg.wal_syncs_s if s.pg else None),
        "server_cpu_s": _Sum(lambda s: s.cpu.server / 100.0 * ncpu if s.cpu.server is not None
                             else None),
        "wal_fpi": _Sum(lambda s: s.pg.wal_fpi_s if s.pg else None),
        "wal_sync_ms": _Sum(lambda s: s.pg.wal_sync_ms_s if s.pg else None),
        "device_reads": _Sum(lambda s: _devices(s, lambda d: d.reads_s)),
        "device_writes": _Sum(lambda s: _devices(s, lambda d: d.writes_s)),
        "device_bytes": _Sum(lambda s: _devices(s, lambda d: (d.read_mib_s + d.write_mib_s) * MIB)),
    }  # fmt: skip
    seen = False
    for s in samples:
        if not s.in_run or s.pg is None:
            continue
        seen = True
        seconds += s.interval_s
        commits += s.pg.commits_s * s.interval_s
        checkpoints += s.pg.checkpoints
        for acc in sums.values():
            acc.add(s)
    if not seen:
        return None
    return RunTotals(
        seconds=seconds,
        commits=commits,
        checkpoints=checkpoints,
        **{name: acc.total for name, acc in sums.items()},
    )
