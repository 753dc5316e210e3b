"""Provoke each bottleneck on purpose on a tiny real cluster, watch real pgbench
runs, and check the verdict.

The machine is shared (other loads run at the same time), so each scenario is
built to be lopsided: the provoked cause dominates by a wide margin, and the
rules only look at shares, never at absolute rates.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from conftest import make_disk_dir
from pgrig import monitor
from pgrig.clients import OneHost
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.monitor import interference, procfs, verdict
from pgrig.monitor.model import MonitorResult
from pgrig.pgsource import binaries
from pgrig.registry import result_type
from pgrig.results import PgbenchRun, from_dict, to_dict
from pgrig.step import Context, Running
from pgrig.storage import cgroups
from pgrig.tools import pgbench

pytestmark = pytest.mark.cluster

SECONDS = 5


def make_cluster(bins: binaries.PgBinaries, settings: dict[str, str], scale: int) -> Cluster:
    base = make_disk_dir("pgrig-test-monitor-")
    c = Cluster.create(bins, base / "work", study="test-monitor", os_user=server_os_user())
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides(settings))
        c.start()
        pgbench.run_init(bins.bin_dir, admin(c), pgbench.InitOptions(scale=scale))
    except BaseException:
        drop_cluster(c)
        raise
    return c


def drop_cluster(c: Cluster) -> None:
    c.destroy()
    shutil.rmtree(c.workdir.parent, ignore_errors=True)


def admin(c: Cluster, options: str | None = None) -> Conn:
    conn = Conn.socket(str(c.socket_dir), c.port, SUPERUSER, "postgres")
    return Conn(make_conninfo(conn.dsn, options=options)) if options else conn


@pytest.fixture(scope="module")
def durable(bins: binaries.PgBinaries) -> Iterator[Cluster]:
    """Stock settings, fsync on: what commits cost on this disk. Scale 1."""
    c = make_cluster(bins, {}, scale=1)
    try:
        yield c
    finally:
        drop_cluster(c)


def watched(
    bins: binaries.PgBinaries,
    c: Cluster,
    opts: pgbench.RunOptions,
    *,
    options: str | None = None,
    during: threading.Thread | None = None,
) -> tuple[MonitorResult, PgbenchRun]:
    conn = admin(c, options)
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=c.workdir,
        scratch=c.workdir,
        conn=conn,
        running=Running(server_pid=c.postmaster_pid()),
    )
    with monitor.Watch(ctx) as watch:
        if during is not None:
            during.start()
        run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, c.workdir)
    if during is not None:
        during.join()
    return watch.result(run), run


def explain(mon: MonitorResult) -> str:
    v = mon.verdict
    return f"{v.summary} | secondary: {v.secondary} | notes: {mon.notes}"


def assert_cause(mon: MonitorResult, cause: str) -> None:
    """The provoked cause is the verdict; on a machine shared with other loads
    (never in CI, where the suite runs alone) it may instead be "starved by
    other processes", which is then true: the run is marked disturbed, and the
    provoked cause is still seen - except "CPU-bound in the server", which by
    its rule never holds when others took more CPU than the server."""
    v = mon.verdict
    if v.cause == "starved" and mon.disturbed is not None:
        if cause != "cpu":
            seen = any(line.startswith(verdict.CAUSES[cause]) for line in v.secondary)
            if not seen:
                # Others took so much that the provoked cause left no trace (ci10: a
                # neighbour's Chromium at 20% of the CPU, six workers): not judged,
                # with the monitor's reason, as tests/disturbance.py does.
                pytest.skip(f"not judged: {interference.disturbance(mon)} ({explain(mon)})")
        return
    assert v.cause == cause, explain(mon)


# --------------------------------------------------------------------------
# A slow disk on demand: a blkio throttle for the server's processes


@contextlib.contextmanager
def throttled_writes(c: Cluster, iops: int) -> Iterator[None]:
    """Cap the write IOPS of the server's processes on the disk under test, as a
    slow disk would: cgroup v1 blkio (or v2 io.max). Skips where neither is usable."""
    fs_dev = os.stat(c.datadir).st_dev
    dev = f"{os.major(fs_dev)}:{os.minor(fs_dev)}"
    disk = Path(f"/sys/dev/block/{dev}").resolve()
    if (disk / "partition").exists():
        disk = disk.parent
    dev = (disk / "dev").read_text().strip()
    v1 = Path("/sys/fs/cgroup/blkio")
    if os.geteuid() != 0 or not (v1 / "cgroup.procs").exists():
        pytest.skip("needs root and the cgroup v1 blkio controller to slow the disk down")
    group = v1 / f"pgrig-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "blkio.throttle.write_iops_device").write_text(f"{dev} {iops}")
        _move_server(c, group / "cgroup.procs")
        yield
    finally:
        _move_server(c, v1 / "cgroup.procs")
        # pgrig's own removal: moves out what the server forked meanwhile, retries
        cgroups.remove_dir(group)


def _move_server(c: Cluster, procs_file: Path) -> None:
    pm = c.postmaster_pid()
    assert pm is not None
    for pid in {pm} | procfs.descendants(procfs.all_processes(), [pm]):
        with contextlib.suppress(OSError):  # a backend that just exited
            procs_file.write_text(str(pid))


# --------------------------------------------------------------------------
# The verdicts


def test_lock_contention_with_a_checkpoint_marked(
    bins: binaries.PgBinaries, durable: Cluster
) -> None:
    """Scale 1 has one branch row: 16 read-write clients queue on its row lock
    (seed 004 sees this at small scales)."""

    def checkpoint_soon() -> None:
        threading.Event().wait(2.0)
        with admin(durable).connect() as db:
            db.execute("CHECKPOINT")

    mon, run = watched(
        bins,
        durable,
        pgbench.RunOptions(mode="read-write", clients=16, threads=2, duration_s=SECONDS),
        # Commits not waiting for the disk keep WAL waits out of the picture.
        options="-c synchronous_commit=off",
        during=threading.Thread(target=checkpoint_soon),
    )
    assert mon.verdict.cause == "lock", explain(mon)
    assert "Lock:transactionid" in mon.verdict.summary
    # The forced checkpoint shows up on pgbench's time axis, inside the run.
    assert any(c.completed and 0 <= c.start_s <= SECONDS + 1 for c in mon.checkpoints), (
        mon.checkpoints
    )
    inside = [s for s in mon.samples if s.in_run]
    assert len(inside) >= SECONDS - 1
    # Samples carry pgbench's tps for the same second.
    assert sum(s.tps is not None for s in inside) >= len(inside) - 1
    assert mon.client_started_at is not None
    assert inside[0].pg is not None and inside[0].pg.commits_s > 0
    assert inside[0].cpu.server is not None and inside[0].cpu.server > 0
    assert mon.devices, mon.notes


def test_wal_bound_on_a_slow_disk(bins: binaries.PgBinaries, durable: Cluster) -> None:
    """One client, synchronous_commit=on, fsync=on: every commit waits for its WAL
    flush. This disk syncs in ~0.1 ms, so the run would be CPU-bound here (the
    verdict says so); capped at 200 write IOPS, as a slow disk, WAL dominates."""
    limits = monitor.Limits(fdatasync_ops=200.0)
    conn = admin(durable, "-c synchronous_commit=on")
    ctx = Context(
        clients=OneHost(bins.client_bin_dir),
        bins=bins,
        target=durable.workdir,
        scratch=durable.workdir,
        conn=conn,
        running=Running(server_pid=durable.postmaster_pid()),
    )
    opts = pgbench.RunOptions(mode="read-write", clients=1, threads=1, duration_s=SECONDS)
    with throttled_writes(durable, 200), monitor.Watch(ctx, limits=limits) as watch:
        run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, durable.workdir)
    mon = watch.result(run)
    assert mon.verdict.cause == "wal", explain(mon)
    assert "IO:WALSync" in mon.verdict.summary
    assert any("fdatasync ops/s" in line for line in mon.verdict.against_limits)


def test_cpu_bound_select_only_in_memory(bins: binaries.PgBinaries, durable: Cluster) -> None:
    """Select-only at scale 1 lives in shared_buffers: no I/O, no locks; four
    clients on four pgbench threads keep both CPUs busy without saturating any
    pgbench thread."""
    mon, _ = watched(
        bins,
        durable,
        pgbench.RunOptions(mode="select-only", clients=4, threads=4, duration_s=SECONDS),
    )
    assert_cause(mon, "cpu")
    assert "server" in mon.verdict.summary and "pgbench" in mon.verdict.summary


def test_load_generator_saturated(bins: binaries.PgBinaries, durable: Cluster) -> None:
    """64 clients on one pgbench thread: the thread never waits for the server,
    the backends wait for it."""
    mon, _ = watched(
        bins,
        durable,
        pgbench.RunOptions(mode="select-only", clients=64, threads=1, duration_s=SECONDS),
    )
    assert_cause(mon, "client")
    assert "Client:ClientRead" in mon.verdict.summary


# Judges the CPU shares: a neighbour test's load made the verdict "starved" (CI,
# 2026-11-27, other processes at 38%); run alone after the parallel phase.
@pytest.mark.exclusive
def test_storage_read_bound(bins: binaries.PgBinaries) -> None:
    """256 kB of shared_buffers for 75 MB of accounts, and the data files pushed out
    of the page cache every 50 ms (POSIX_FADV_DONTNEED on this cluster's files only:
    other processes' cache is left alone), so every miss is a device read."""
    c = make_cluster(bins, {"shared_buffers": "256kB"}, scale=5)
    stop = threading.Event()

    def evict() -> None:
        while not stop.is_set():
            for path in (c.datadir / "base").rglob("*"):
                with contextlib.suppress(OSError):
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)
            stop.wait(0.05)

    evictor = threading.Thread(target=evict)
    try:
        evictor.start()
        mon, _ = watched(
            bins,
            c,
            pgbench.RunOptions(mode="select-only", clients=4, threads=2, duration_s=SECONDS),
        )
    finally:
        stop.set()
        evictor.join()
        drop_cluster(c)
    assert mon.verdict.cause == "read", explain(mon)
    assert "IO:DataFileRead" in mon.verdict.summary and "hit ratio" in mon.verdict.summary
    # The result is stored as JSON and read back as the registered type.
    again = from_dict(result_type("monitor"), to_dict(mon))
    assert again == mon
