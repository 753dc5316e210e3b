"""The process reader a remote host's monitor runs (``procview.READER``),
started here through this machine's executor: the same reader, meter and
ledger as over SSH (tests/test_remote_monitor.py), one connector apart."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pgrig import monitor
from pgrig.clients import OneHost
from pgrig.hosts.local import HERE
from pgrig.monitor import procfs, procview
from pgrig.monitor.sampling import ProcessesThere
from pgrig.pgsource import binaries
from pgrig.step import Context


def test_one_look_holds_the_hosts_counters_and_its_processes() -> None:
    reader = procview.HostReader(HERE, None)
    try:
        first = reader.look()
        second = reader.look()
    finally:
        reader.close()
    assert first.me == os.getpid()  # started by pgrig here: pgrig is its root
    assert first.postmaster is None  # no data directory given
    mine = first.procs[os.getpid()]
    assert mine.comm == procfs.parse_pid_stat(procfs.read_text("/proc/self/stat") or "").comm
    assert procfs.parse_stat(first.files[0]).ncpu == os.cpu_count()
    assert "MemTotal" in procfs.parse_meminfo(first.files[2])
    # ours is read every look (its bytes), an idle other's only when its CPU moved
    assert os.getpid() in first.io and os.getpid() in second.io
    assert len(second.io) < len(second.procs)
    assert second.at >= first.at and abs(second.wall_of(mine.starttime) - time.time()) < 3600 * 24
    assert abs(second.wall_of(mine.starttime) - procview.wall_of(mine.starttime)) < 1.0
    assert first.size > 0


def test_a_host_read_by_its_reader_tells_this_process_apart() -> None:
    """This process's busy loop is pgrig's own, not another's load, read through
    the reader as a remote host is (``ProcessesThere``)."""
    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins, sampling=ProcessesThere,
                  target=Path("/var/tmp"), scratch=Path("/var/tmp"))  # fmt: skip
    with monitor.Watch(ctx, interval=0.2) as watch:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            pass
    mon = watch.result(None)
    assert mon.samples and all(s.cpu.other is not None for s in mon.samples)
    # a tenth of a core at least, whatever else the shared machine runs
    assert sum(s.cpu.pgrig or 0 for s in mon.samples) / len(mon.samples) > 10 / os.cpu_count()
    ledger = watch._host.meter.ledger  # type: ignore[attr-defined]
    assert ledger.walks > 1 and not [k for k in ledger.last if k[0] == os.getpid()]
    assert not any("not told apart" in n for n in mon.notes), mon.notes


def test_a_reader_killed_mid_watch_is_noted_and_the_host_still_read_whole() -> None:
    """The reader on a host dies (killed here by PID, as an OOM kill would):
    the watch says so and reads the host's counters file by file for the rest,
    its processes no longer told apart; it never fails the run."""
    import signal

    bins = binaries.PgBinaries(Path("/usr/lib/postgresql/15/bin"), "15", 15)
    ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins, sampling=ProcessesThere,
                  target=Path("/var/tmp"), scratch=Path("/var/tmp"))  # fmt: skip
    with monitor.Watch(ctx, interval=0.2) as watch:
        time.sleep(0.5)
        reader = watch._host._reader  # type: ignore[attr-defined]
        assert reader is not None
        os.kill(reader._proc.pid, signal.SIGKILL)
        time.sleep(0.8)
    mon = watch.result(None)
    assert any("the process reader on localhost stopped" in n for n in mon.notes), mon.notes
    told = [s.cpu.other is not None for s in mon.samples]
    assert told[0] and not told[-1], told  # told apart, then the host as a whole
    assert all(0 <= s.cpu.busy <= 100 for s in mon.samples)
