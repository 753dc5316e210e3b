#!/usr/bin/env python3
"""TPC-C: how fast does pgrig load, and how hard do the two modes drive the server?
(TPC-C issue benchmark)

On one throwaway cluster (pgrig's own cluster code, ``oltp`` profile, which has
synchronous_commit = off), load W warehouses (default 4) with the in-server
loader, then run the server-side mode (one PL/pgSQL call per transaction) and
the client-side mode (one round trip per statement) for D seconds each at C
connections, alternately, R rounds - the machine's drift favours neither - with
every consistency condition checked after each run.

Prints the load (time, rows/s, MB/s), every run, then per mode the median tpmC
and tpmTotal with their range, and the median ratio server-side / client-side
of the rounds. The issue's anchor on a 2-core VM: go-tpc loads 4 warehouses in
29 s (15 MB/s) and reaches tpmC 27,500-31,500; goals: load <= 10 s, server-side
tpmC >= 45,000.

    .venv/bin/python bench/tpcc.py [--warehouses 4] [--connections 4] [--duration 60]
        [--rounds 2] [--set shared_buffers=2GB]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from pgrig.cluster import binaries, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.workloads.tpcc import checks, driver, loader
from pgrig.workloads.tpcc.model import TpccRun


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--set", dest="overrides", action="append", default=["shared_buffers=2GB"])
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where the cluster goes")
    args = ap.parse_args()

    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-tpcc-", dir=args.dir))
    base.chmod(0o755)
    cluster = Cluster.create(bins, base / "work", study="bench-tpcc", os_user=server_os_user())
    overrides = dict(item.split("=", 1) for item in args.overrides)
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("oltp").with_overrides(overrides))
        cluster.start()
        admin = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        with admin.connect() as db:
            db.execute("CREATE DATABASE tpcc")
        conn = admin.with_dbname("tpcc")
        print(
            f"PostgreSQL {bins.version}, oltp profile + {overrides}, {os.cpu_count()} CPUs; "
            f"{args.warehouses} warehouses, {args.connections} connections, "
            f"{args.duration} s per run, {args.rounds} rounds",
            flush=True,
        )
        load = loader.load(conn, args.warehouses, jobs=args.jobs)
        print(
            f"load: {load.elapsed_s:.2f} s, {load.rows:,} rows, "
            f"{load.database_bytes / 1e6:,.0f} MB, "
            f"{load.rows_per_s:,.0f} rows/s, {load.mb_per_s:.1f} MB/s "
            f"({', '.join(f'{k} {v:.2f} s' for k, v in load.phases.items())})",
            flush=True,
        )
        verdict = checks.check(conn)
        print(f"checks after load: {'all hold' if verdict.passed else verdict.failures}")
        results: dict[str, list[TpccRun]] = {"server": [], "client": []}
        ratios = []
        for rnd in range(1, args.rounds + 1):
            modes = ("server", "client") if rnd % 2 else ("client", "server")
            for mode in modes:
                with conn.connect() as db:
                    db.execute("CHECKPOINT")
                opts = driver.RunOptions(
                    mode=mode, connections=args.connections, duration_s=args.duration
                )
                run, _ = driver.run(bins.bin_dir, conn, opts, cluster.workdir)
                results[mode].append(run)
                ok = checks.check(conn)
                no = run.stats("new_order")
                print(
                    f"round {rnd} {mode:<6}: tpmC {run.tpmc:>9,.0f}"
                    f"  tpmTotal {run.tpm_total:>9,.0f}"
                    f"  New-Order p95 {no.p95_ms if no else 0:.2f} ms  rollbacks {run.rollbacks}"
                    f"  retried {run.retried}  failed {run.failed}  checks "
                    f"{'all hold' if ok.passed else [c.number for c in ok.failures]}",
                    flush=True,
                )
            ratios.append(results["server"][-1].tpmc / results["client"][-1].tpmc)
        if not ratios:
            return  # --rounds 0: the load alone
        for mode, runs in results.items():
            tpmc = [r.tpmc for r in runs]
            total = [r.tpm_total for r in runs]
            print(
                f"{mode}-side: tpmC median {statistics.median(tpmc):,.0f} "
                f"(range {min(tpmc):,.0f}-{max(tpmc):,.0f}), tpmTotal median "
                f"{statistics.median(total):,.0f} (range {min(total):,.0f}-{max(total):,.0f})"
            )
        print(
            f"server / client tpmC ratio: median {statistics.median(ratios):.2f} "
            f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
