#!/usr/bin/env python3
"""Does pgrig's harness cost anything measurable? (core issue benchmark)

On one throwaway cluster (pgrig's own cluster code, ``oltp`` profile), load
TPC-B at scale S once, then run the same select-only workload alternately:

* raw:   ``pgbench -n -M prepared -S -c C -j J -T D`` exactly as a DBA types it;
* pgrig: the study's own step - CHECKPOINT, then pgbench with ``-P 1 -r`` and
  a sampled per-transaction log, its output streamed through pgrig's parsers
  and progress callbacks.

Pairs alternate order (raw first, then pgrig first, ...) so slow drift of the
machine does not favour one side. Prints every pair, then the median ratio
``pgrig_tps / pgbench_tps`` with its range. Goal: >= 0.98.

    .venv/bin/python bench/harness_overhead.py [--pairs 5] [--duration 20]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

from pgrig import proc
from pgrig.cluster import binaries, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.plan import StudyPlan, TpcbPlan
from pgrig.step import Context
from pgrig.tools import pgbench
from pgrig.ui import Ui
from pgrig.workloads import tpcb

TPS = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)", re.M)


def raw_pgbench(bins: binaries.PgBinaries, conn: Conn, clients: int, threads: int, duration: int) -> float:
    with conn.connect() as db:
        db.execute("CHECKPOINT")
    argv = [bins.path("pgbench"), "-n", "-M", "prepared", "-S", "-c", str(clients), "-j",
            str(threads), "-T", str(duration), *conn.args()]
    out = proc.run(argv, timeout=duration + 120).stdout
    match = TPS.search(out)
    if not match:
        sys.exit(f"raw pgbench printed no tps line:\n{out}")
    return float(match.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--target", type=Path, default=Path("/var/tmp"))
    args = ap.parse_args()

    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-", dir=args.target))
    base.chmod(0o755)
    cluster = Cluster.create(bins, base / "work", study="bench", os_user=server_os_user())
    ui = Ui()
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("oltp"))
        cluster.start()
        conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        plan = StudyPlan(
            target=base,
            tpcb=TpcbPlan(scale=args.scale, clients=(args.clients,), duration_s=args.duration,
                          modes=("select-only",)),
        )
        threads = plan.threads_for(args.clients)
        pgbench.run_init(bins.bin_dir, conn, pgbench.InitOptions(scale=args.scale))
        ctx = Context(bins=bins, target=base, scratch=cluster.workdir, conn=conn)
        (step,) = tpcb.bench_steps(plan)

        def through_pgrig() -> float:
            with ui.step(step.label, total=step.total) as line:
                result, _ = step.action(ctx, line)
            return float(result.tps)

        def through_raw() -> float:
            return raw_pgbench(bins, conn, args.clients, threads, args.duration)

        print(f"select-only, scale {args.scale}, -c {args.clients} -j {threads}, "
              f"{args.duration} s per run, {args.pairs} pairs, PostgreSQL {bins.version}")
        ratios = []
        for i in range(args.pairs):
            if i % 2 == 0:
                raw, rig = through_raw(), through_pgrig()
            else:
                rig, raw = through_pgrig(), through_raw()
            ratios.append(rig / raw)
            print(f"pair {i + 1}: pgbench {raw:10,.0f} tps   pgrig {rig:10,.0f} tps   "
                  f"ratio {rig / raw:.3f}")
        med = statistics.median(ratios)
        print(f"pgrig_tps / pgbench_tps: median {med:.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)})")
        print("goal >= 0.98:", "met" if med >= 0.98 else "NOT met")
    finally:
        cluster.destroy()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
