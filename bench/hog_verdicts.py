#!/usr/bin/env python3
"""The monitor's verdicts beside a CPU hog, round after round (issue 41).

Each round does what tests/test_monitor_interference.py's hog test does, on
one throwaway cluster (stock, fsync off, scale 1): one busy process per CPU,
an idle baseline, then select-only with 1 and 2 clients and read-write with 1
client, 3 s each, watched. Prints each run's verdict, its backends' wait
events and - where the server read them - their processes' states. The test
asks every run for "starved by other processes"; its flake was the
read-write run called "WAL / fsync bound" (a backend preempted inside
XLogWrite's write() keeps IO:WALWrite set).

Each verdict is also decided again on the same samples with the states
dropped: what the rule said before it read them, on the very same runs.

``--commit-loop`` adds a backend committing in a loop inside a procedure
(no client to wait for, fsync off: each commit one WAL write()) beside the
hog, so that a starved pgbench does not hide the WAL writes.

``--wal`` adds, each round, the other side: a WAL-bound run beside the same
hog (another cluster, fsync and synchronous_commit on, the server's processes
capped at ``--iops`` write IOPS, the test's ``WAL_IOPS``, by a cgroup v1 blkio
throttle, 1 read-write client for the test's 5 s), which must stay "WAL /
fsync bound".

    .venv/bin/python bench/hog_verdicts.py [--rounds 6] [--wal] [--commit-loop]
        [--interval 1.0] [--iops N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_monitor_interference as hogtest  # noqa: E402
import test_monitor_verdicts as verdicts  # noqa: E402
from conftest import make_disk_dir  # noqa: E402
from pgrig import monitor  # noqa: E402
from pgrig.clients import OneHost  # noqa: E402
from pgrig.cluster import profiles  # noqa: E402
from pgrig.cluster.server import Cluster, InitdbOptions, server_os_user  # noqa: E402
from pgrig.monitor import interference, verdict  # noqa: E402
from pgrig.monitor.model import IdleBaseline, MonitorResult, Sample  # noqa: E402
from pgrig.pgsource import binaries  # noqa: E402
from pgrig.results import PgbenchRun  # noqa: E402
from pgrig.step import Context, Running  # noqa: E402
from pgrig.tools import pgbench  # noqa: E402


def waits_of(samples: Sequence[Sample]) -> str:
    """'IO:WALWrite 5 (R 4, S 1), CPU 3 (R 3)': the run's backends by event, and state."""
    events: Counter[str] = Counter()
    states: dict[str, Counter[str]] = {}
    for s in samples:
        if s.in_run and s.pg is not None:
            events.update(s.pg.waits)
            for key, n in getattr(s.pg, "states", {}).items():  # a pgrig before them: none
                event, _, state = key.rpartition("|")
                states.setdefault(event, Counter())[state] += n
    parts = []
    for event, n in events.most_common(4):
        by = ", ".join(f"{st} {k}" for st, k in states.get(event, Counter()).most_common())
        parts.append(f"{event} {n}" + (f" ({by})" if by else ""))
    return ", ".join(parts)


def without_states(mon: MonitorResult, run: PgbenchRun) -> str:
    """The verdict of the same samples with the backends' states dropped: what
    the rule said before it read them (the events as they are)."""
    if not any(getattr(s.pg, "states", None) for s in mon.samples):
        return str(mon.verdict.cause)  # none read: the same
    bare = [replace(s, pg=replace(s.pg, states={})) if s.pg else s for s in mon.samples]
    return str(verdict.decide(bare, mon.checkpoints, mon.limits, run, mon.others).cause)


def hog_study(
    bins: binaries.PgBinaries, c: Cluster, baseline: IdleBaseline, interval: float
) -> list[tuple[MonitorResult, PgbenchRun]]:
    """The hog test's three runs (its ``study``), sampled every ``interval`` s."""
    conn = hogtest.admin(c)
    ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins, target=c.workdir,
                  scratch=c.workdir, conn=conn,
                  running=Running(server_pid=c.postmaster_pid()))  # fmt: skip
    out = []
    for mode, clients in (("select-only", 1), ("select-only", 2), ("read-write", 1)):
        opts = pgbench.RunOptions(
            mode=mode,  # type: ignore[arg-type]
            clients=clients,
            threads=clients,
            duration_s=hogtest.SECONDS,
        )
        with monitor.Watch(ctx, interval, baseline=baseline) as watch:
            run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, c.workdir)
        out.append((watch.result(run), run))
    return out


def commit_loop(bins: binaries.PgBinaries, c: Cluster, interval: float) -> tuple[str, str, str]:
    """One backend committing in a loop (the test's ``COMMIT_LOOP``: no client
    round trips, fsync off, so each commit is one WAL write()) beside the hog:
    its IO:WALWrite samples, their states, the verdict with and without them."""
    samples = hogtest.commit_loop(bins, c, interval)
    others, _ = interference.assess(samples, ())
    new = verdict.decide(samples, (), None, None, others).cause
    bare = [replace(s, pg=replace(s.pg, states={})) if s.pg else s for s in samples]
    old = verdict.decide(bare, (), None, None, others).cause
    return new, old, waits_of(samples)


def wal_bound(
    bins: binaries.PgBinaries, name: str, interval: float, iops: int
) -> tuple[MonitorResult, PgbenchRun]:
    c = verdicts.make_cluster(bins, {}, scale=1)
    try:
        conn = verdicts.admin(c, "-c synchronous_commit=on")
        ctx = Context(clients=OneHost(bins.client_bin_dir), bins=bins, target=c.workdir,
                      scratch=c.workdir, conn=conn,
                      running=Running(server_pid=c.postmaster_pid()))  # fmt: skip
        opts = pgbench.RunOptions(
            mode="read-write", clients=1, threads=1, duration_s=verdicts.SECONDS
        )
        ncpu = os.cpu_count() or 1
        with (
            verdicts.throttled_writes(c, iops),
            hogtest.hogs(hogtest.CPU_HOG, name, ncpu),
            monitor.Watch(ctx, interval) as watch,
        ):
            run, _ = pgbench.run_bench(bins.bin_dir, conn, opts, c.workdir)
        return watch.result(run), run
    finally:
        verdicts.drop_cluster(c)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--wal", action="store_true", help="a WAL-bound run beside the hog too")
    ap.add_argument(
        "--commit-loop",
        action="store_true",
        help="a backend committing in a loop (no client) beside the hog too",
    )
    ap.add_argument(
        "--interval", type=float, default=1.0, help="seconds between samples (the tests': 1)"
    )
    ap.add_argument(
        "--iops",
        type=int,
        default=hogtest.WAL_IOPS,
        help="the WAL-bound run's write IOPS (the test's: %(default)s)",
    )
    args = ap.parse_args()
    bins = binaries.find()
    name = hogtest.hog_name("cpuhog")
    ncpu = os.cpu_count() or 1
    base = make_disk_dir("pgrig-bench-hog-")
    c = Cluster.create(bins, base / "work", study="bench-hog", os_user=server_os_user())
    tally: Counter[tuple[str, str]] = Counter()
    try:
        c.initdb(InitdbOptions())
        c.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        c.start()
        pgbench.run_init(bins.bin_dir, hogtest.admin(c), pgbench.InitOptions(scale=1))
        for i in range(1, args.rounds + 1):
            quiet, probe = interference.wait_quiet(20.0, target=c.workdir)
            load = os.getloadavg()[0]
            print(f"round {i}: load {load:.1f}, others before the hog {probe.other_pct:.0f}%"
                  + ("" if quiet else " (not quiet after 20 s)"), flush=True)  # fmt: skip
            with hogtest.hogs(hogtest.CPU_HOG, name, ncpu):
                baseline = monitor.idle_baseline(2.0, target=c.workdir)
                results = hog_study(bins, c, baseline, args.interval)
            if args.wal:
                results.append(wal_bound(bins, name, args.interval, args.iops))
            if args.commit_loop:
                with hogtest.hogs(hogtest.CPU_HOG, name, ncpu):
                    new, old, waits = commit_loop(bins, c, args.interval)
                tally[("commit loop", new)] += 1
                tally[("commit loop (states dropped)", old)] += 1
                print(f"  {'commit loop':15s} {new:8s} (states dropped: {old:8s}) {waits}",
                      flush=True)  # fmt: skip
            for n, (mon, run) in enumerate(results):
                key = "wal-bound rw c1" if n == 3 else f"{run.mode} c{run.clients}"
                old = without_states(mon, run)
                tally[(key, mon.verdict.cause)] += 1
                tally[(key + " (states dropped)", old)] += 1
                print(f"  {key:15s} {mon.verdict.cause:8s} (states dropped: {old:8s}) "
                      f"{waits_of(mon.samples)}", flush=True)  # fmt: skip
    finally:
        c.destroy()
        shutil.rmtree(base, ignore_errors=True)
    print("verdicts over the rounds:")
    for (key, cause), n in sorted(tally.items()):
        print(f"  {key:15s} {cause:8s} {n} of {args.rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
