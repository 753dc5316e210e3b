#!/usr/bin/env python3
"""Does watching a run slow it down? (issue 5 benchmark)

On one throwaway cluster (pgrig's own cluster code, ``stock`` profile with
fsync=off), load TPC-B at scale S once, then run the same select-only pgbench
run with the monitor sampling once a second and without it, alternately, the
order flipping every round so slow drift of a shared machine favours neither.

Prints every pair with the CPU other processes took during each run (two
walks of /proc per run, the monitor's own attribution), then the median and
the range of the per-round ratios ``tps_with_sampling / tps_without`` (the
goal: >= 0.99), over all rounds and over the quiet ones (others under 10% in
both runs). On a shared machine that ratio is only as good as the noise
allows, so it also measures what one sample costs directly: 100 samples back
to back, the CPU time of this process and of the sampler's backend, and what
that is at one sample a second as a share of the machine.

    .venv/bin/python bench/monitor_overhead.py [--rounds 6] [--duration 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pgrig import monitor
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.monitor import interference, procfs
from pgrig.pgsource import binaries
from pgrig.step import Context
from pgrig.tools import pgbench

QUIET_PCT = 10.0


def one_run(ctx: Context, opts: pgbench.RunOptions, watch: bool) -> tuple[float, float, int, float]:
    """(tps, CPU seconds of this process during the run, samples taken, % of the
    machine other processes took during the run)."""
    assert ctx.conn is not None
    with ctx.conn.connect() as db:
        db.execute("CHECKPOINT")
    ledger = interference.Ledger.start()
    ledger.walk(ctx.server_pid)
    before = resource.getrusage(resource.RUSAGE_SELF)
    samples = 0
    if watch:
        with monitor.Watch(ctx) as w:
            run, _ = pgbench.run_bench(ctx.bins.bin_dir, ctx.conn, opts, ctx.scratch)
        samples = len(w.result(run).samples)
    else:
        run, _ = pgbench.run_bench(ctx.bins.bin_dir, ctx.conn, opts, ctx.scratch)
    after = resource.getrusage(resource.RUSAGE_SELF)
    ledger.walk(ctx.server_pid)
    others = sum(p.cpu_pct for p in ledger.top(os.cpu_count() or 1, n=100_000))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run.tps, cpu, samples, others


def sample_cost(ctx: Context, n: int = 100) -> tuple[float, float]:
    """(ms of this process's CPU, ms of the sampler backend's CPU) per sample."""
    with monitor.Watch(ctx, interval=60) as w:
        assert w._conn is not None
        backend = w._conn.info.backend_pid
        server0 = procfs.read_schedstat(f"/proc/{backend}/schedstat")
        cpu0 = time.process_time()
        for _ in range(n):
            w._sample()
        cpu = time.process_time() - cpu0
        server1 = procfs.read_schedstat(f"/proc/{backend}/schedstat")
    server_ms = (server1[0] - server0[0]) / 1e6 / n if server0 and server1 else float("nan")
    return 1000 * cpu / n, server_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--target", type=Path, default=Path("/var/tmp"))
    args = ap.parse_args()

    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-monitor-", dir=args.target))
    base.chmod(0o755)
    cluster = Cluster.create(bins, base / "work", study="bench-monitor", os_user=server_os_user())
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("stock").with_overrides({"fsync": "off"}))
        cluster.start()
        conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        pgbench.run_init(bins.bin_dir, conn, pgbench.InitOptions(scale=args.scale))
        ctx = Context(
            bins=bins,
            target=cluster.workdir,
            scratch=cluster.workdir,
            conn=conn,
            server_pid=cluster.postmaster_pid(),
        )
        opts = pgbench.RunOptions(
            mode="select-only",
            clients=args.clients,
            threads=args.clients,
            duration_s=args.duration,
        )
        print(
            f"select-only, scale {args.scale}, {args.clients} clients, {args.duration} s per run, "
            f"{args.rounds} rounds; PostgreSQL {bins.version}"
        )
        ratios, quiet, costs = [], [], []
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            tps: dict[bool, float] = {}
            others: dict[bool, float] = {}
            for watch in order:
                tps[watch], cpu, samples, others[watch] = one_run(ctx, opts, watch)
                if watch and samples:
                    costs.append(cpu / samples)
            ratios.append(tps[True] / tps[False])
            if max(others.values()) < QUIET_PCT:
                quiet.append(ratios[-1])
            print(
                f"round {r + 1}: with sampling {tps[True]:,.0f} tps (others {others[True]:.0f}% "
                f"CPU), without {tps[False]:,.0f} tps (others {others[False]:.0f}%), "
                f"ratio {ratios[-1]:.4f}",
                flush=True,
            )
            time.sleep(1)
        for name, values in (("all rounds", ratios), ("quiet rounds", quiet)):
            if not values:
                print(f"tps_with_sampling / tps_without, {name}: none (others >= {QUIET_PCT:g}%)")
                continue
            print(
                f"tps_with_sampling / tps_without, {name}: median "
                f"{statistics.median(values):.4f} (min {min(values):.4f}, max {max(values):.4f}, "
                f"{len(values)} rounds)"
            )
        print(
            f"pgrig process CPU per watched run, per sample (sampler + pgbench output): "
            f"{1000 * statistics.median(costs):.1f} ms"
        )
        mine, server = sample_cost(ctx)
        ncpu = os.cpu_count() or 1
        share = (mine + server) / (1000 * ncpu) * 100
        print(
            f"one sample: {mine:.2f} ms CPU in pgrig + {server:.2f} ms in the sampler's backend "
            f"= {share:.2f}% of this {ncpu}-CPU machine at one sample per second"
        )
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
