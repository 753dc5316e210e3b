#!/usr/bin/env python3
"""TPC-C: how fast does pgrig load, and how hard do the two modes drive the server?
(TPC-C issue benchmark)

On one throwaway cluster (pgrig's own cluster code, ``oltp`` profile, which has
synchronous_commit = off):

* load: W warehouses (default 4), pgrig's loader and go-tpc's ``tpcc prepare``
  (PostgreSQL driver, ``--no-check``, as many threads as pgrig's jobs)
  alternately, L rounds (``--load-rounds``), each into a new database. pgrig
  loads once per ``--load-wal`` variant: ``minimal`` (the server restarted at
  wal_level = minimal for the copies and index builds, as a study does on its
  own cluster; both restarts timed) and ``profile`` (at the profile's WAL, as
  on a server pgrig may not restart). Prints every load - pgrig's with its
  phases - then the median time of each with its range and the median ratio
  go-tpc / pgrig with the rounds' ratios, per variant. go-tpc:
  ``--go-tpc PATH``, else ``go-tpc`` on PATH or in ~/go/bin; it must be a build
  with the PostgreSQL driver (v1.0.7, the module proxy's latest, has MySQL only;
  master has it) and it speaks TCP only, so the cluster listens on 127.0.0.1.
  Issue 18.2's goal: ratio >= 5.
* run: the server-side mode (one PL/pgSQL call per transaction) and the
  client-side mode (one round trip per statement) for D seconds each at C
  connections, alternately, R rounds - the machine's drift favours neither -
  with every consistency condition checked after each run. Prints every run,
  then per mode the median tpmC and tpmTotal with their range, and the median
  ratio server-side / client-side of the rounds.

    .venv/bin/python bench/tpcc.py [--warehouses 4] [--load-rounds 3] [--connections 4]
        [--duration 60] [--rounds 2] [--set shared_buffers=2GB] [--go-tpc PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.workloads.tpcc import checks, driver, loader
from pgrig.workloads.tpcc.model import TpccLoad, TpccRun


def find_go_tpc(given: str | None) -> str | None:
    """go-tpc with the PostgreSQL driver, or None."""
    candidates = [given] if given else [shutil.which("go-tpc"), str(Path.home() / "go/bin/go-tpc")]
    for path in filter(None, candidates):
        try:
            usage = subprocess.run(
                [path, "tpcc", "--help"], capture_output=True, text=True, timeout=30
            ).stdout
        except OSError:
            continue
        if "postgres" in usage:
            return path
    return None


def fresh_database(admin: Conn, name: str) -> Conn:
    with admin.connect() as db:
        db.autocommit = True
        db.execute(f"DROP DATABASE IF EXISTS {name}")
        db.execute(f"CREATE DATABASE {name}")
    return admin.with_dbname(name)


def go_tpc_load(go_tpc: str, port: int, warehouses: int, threads: int) -> float:
    """Seconds of ``go-tpc tpcc prepare`` into a new database ``gotpc``."""
    argv = [go_tpc, "tpcc", "prepare", "-d", "postgres", "-H", "127.0.0.1", "-P", str(port),
            "-U", SUPERUSER, "-D", "gotpc", "--conn-params", "sslmode=disable",
            "--warehouses", str(warehouses), "-T", str(threads), "--no-check"]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"go-tpc failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (range {min(values):.2f}-{max(values):.2f})"


def load_rounds(
    args: argparse.Namespace, cluster: Cluster, admin: Conn, go_tpc: str | None
) -> Conn:
    """The alternated loads; returns the database pgrig loaded last."""
    ours: dict[str, list[TpccLoad]] = {wal: [] for wal in args.load_wal}
    theirs: list[float] = []
    ratios: dict[str, list[float]] = {wal: [] for wal in args.load_wal}
    conn = admin.with_dbname("tpcc")
    loaders = [*(f"pgrig {wal}" for wal in args.load_wal), "go-tpc"]
    for rnd in range(1, args.load_rounds + 1):
        shift = (rnd - 1) % len(loaders)
        for who in loaders[shift:] + loaders[:shift]:
            if who.startswith("pgrig"):
                wal = who.split()[1]
                conn = fresh_database(admin, "tpcc")
                minimal = cluster if wal == "minimal" else None
                result = loader.load(conn, args.warehouses, jobs=args.jobs, minimal_wal=minimal)
                ours[wal].append(result)
                print(
                    f"round {rnd} {who:<13}: {result.elapsed_s:6.2f} s, {result.rows:,} rows, "
                    f"{result.database_bytes / 1e6:,.0f} MB, {result.rows_per_s:,.0f} rows/s, "
                    f"{result.mb_per_s:.1f} MB/s; load average {os.getloadavg()[0]:.1f}; "
                    "phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.phases.items()),
                    flush=True,
                )
            elif go_tpc is not None:
                fresh_database(admin, "gotpc")
                theirs.append(go_tpc_load(go_tpc, cluster.port, args.warehouses, args.jobs))
                print(
                    f"round {rnd} go-tpc       : {theirs[-1]:6.2f} s; "
                    f"load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        if go_tpc is not None:
            for wal, loads in ours.items():
                ratios[wal].append(theirs[-1] / loads[-1].elapsed_s)
    with admin.connect() as db:
        db.autocommit = True
        db.execute("DROP DATABASE IF EXISTS gotpc")
    for wal, loads in ours.items():
        if loads:
            print(f"pgrig {wal} load s: {spread([r.elapsed_s for r in loads])}")
    if theirs:
        print(f"go-tpc load s: {spread(theirs)}")
    for wal, values in ratios.items():
        if values:
            print(
                f"go-tpc / pgrig {wal} load time: median {statistics.median(values):.2f} "
                f"(rounds: {', '.join(f'{r:.2f}' for r in values)})"
            )
    if go_tpc is None:
        print("go-tpc: not found with the PostgreSQL driver (see --go-tpc); pgrig alone")
    return conn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load-rounds", type=int, default=3)
    ap.add_argument("--load-wal", nargs="+", choices=("minimal", "profile"),
                    default=["minimal", "profile"])  # fmt: skip
    ap.add_argument("--go-tpc", help="a go-tpc built with the PostgreSQL driver")
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
        go_tpc = find_go_tpc(args.go_tpc)
        if go_tpc is not None:  # go-tpc's driver speaks TCP only
            with admin.connect() as db:
                db.autocommit = True
                db.execute("ALTER SYSTEM SET listen_addresses = '127.0.0.1'")
            cluster.stop()
            cluster.start()
        print(
            f"PostgreSQL {bins.version}, oltp profile + {overrides}, {os.cpu_count()} CPUs; "
            f"{args.warehouses} warehouses, {args.connections} connections, "
            f"{args.duration} s per run, {args.rounds} rounds; load average "
            f"{os.getloadavg()[0]:.1f}; loads: {args.load_rounds} "
            f"rounds, {args.jobs} jobs, go-tpc {go_tpc or 'not found'}",
            flush=True,
        )
        conn = load_rounds(args, cluster, admin, go_tpc)
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
