"""A run's totals from its samples: the server's counters summed over the
seconds inside pgbench's timed window, which is the before/after delta of each
counter over that window (each sample is the delta since the previous one).

pgbench's own setup (its VACUUM of the branches and tellers, the connections)
and whatever follows the run fall outside the window, so a WAL byte here is one
the measured transactions wrote, give or take the sampler's own commit a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pgrig.monitor.model import DeviceSample, RunTotals, Sample
from pgrig.monitor.pgstats import MIB


def _summed(samples: Sequence[Sample], part: Callable[[Sample], float | None]) -> float | None:
    """``part`` (a rate) times each sample's interval, summed; None when a sample lacks it."""
    values = [(part(s), s.interval_s) for s in samples]
    if not values or any(v is None for v, _ in values):
        return None
    return sum((v or 0.0) * dt for v, dt in values)


def _devices(s: Sample, part: Callable[[DeviceSample], float]) -> float | None:
    return sum(part(d) for d in s.devices) if s.devices else None


def run_totals(samples: Iterable[Sample], ncpu: int) -> RunTotals | None:
    """The in-run samples' counters summed; None without server samples in the run."""
    seconds = commits = wal = syncs = cpu = 0.0
    checkpoints = 0
    have_wal = have_syncs = have_cpu = True
    inside = [s for s in samples if s.in_run and s.pg is not None]
    for s in inside:
        assert s.pg is not None
        dt = s.interval_s
        seconds += dt
        commits += s.pg.commits_s * dt
        checkpoints += s.pg.checkpoints
        if s.pg.wal_mib_s is None:
            have_wal = False
        else:
            wal += s.pg.wal_mib_s * MIB * dt
        if s.pg.wal_syncs_s is None:
            have_syncs = False
        else:
            syncs += s.pg.wal_syncs_s * dt
        if s.cpu.server is None:
            have_cpu = False
        else:
            cpu += s.cpu.server / 100.0 * ncpu * dt
    if not inside:
        return None
    return RunTotals(
        seconds=seconds,
        commits=commits,
        checkpoints=checkpoints,
        wal_bytes=wal if have_wal else None,
        wal_syncs=syncs if have_syncs else None,
        server_cpu_s=cpu if have_cpu else None,
        wal_fpi=_summed(inside, lambda s: s.pg.wal_fpi_s if s.pg else None),
        wal_sync_ms=_summed(inside, lambda s: s.pg.wal_sync_ms_s if s.pg else None),
        device_reads=_summed(inside, lambda s: _devices(s, lambda d: d.reads_s)),
        device_writes=_summed(inside, lambda s: _devices(s, lambda d: d.writes_s)),
        device_bytes=_summed(
            inside, lambda s: _devices(s, lambda d: (d.read_mib_s + d.write_mib_s) * MIB)
        ),
    )
