#!/usr/bin/env python3
"""`pgrig plan`'s load estimates against the real load time, at ten times the
size they were calibrated on (issue 18.5, 21.7).

On one throwaway cluster (``oltp`` profile) and an empty calibration (a
private state directory), each loader loads the calibration size once - what
a first study on this machine does - then the plan's estimate for ten times
that size (the same function ``pgrig plan`` calls) is printed beside the real
time of that load (as calibrated: TPC-B without dropping the tables loaded
before). Goal: within 25%.

    .venv/bin/python bench/load_estimate.py [--scale 10] [--warehouses 1]
        [--loaders tpcb:parallel tpcb:client tpcc]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from pgrig import calibration
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.tools import pgbench
from pgrig.workloads.tpcb import loader as tpcb_loader
from pgrig.workloads.tpcb.spec import TpcbSpec
from pgrig.workloads.tpcb.steps import load_estimate, load_kind, load_seconds
from pgrig.workloads.tpcc import loader as tpcc_loader
from pgrig.workloads.tpcc.steps import LOAD_KIND as TPCC_KIND

LOADERS = ("tpcb:parallel", "tpcb:client", "tpcc")


def _tpcb(bins: binaries.PgBinaries, conn: Conn, generate: str, scale: int) -> float:
    spec = TpcbSpec(generate=generate)
    opts = pgbench.InitOptions(scale=scale, generate=generate)  # type: ignore[arg-type]
    if generate == "parallel":
        result = tpcb_loader.load(bins.client_bin_dir, conn, opts, os.cpu_count() or 1)[0]
    else:
        result = pgbench.run_init(bins.client_bin_dir, conn, opts)[0]
    calibration.record(load_kind(spec), scale, load_seconds(result))
    return load_seconds(result)


def _tpcc(conn: Conn, warehouses: int) -> float:
    result = tpcc_loader.load(conn, warehouses, jobs=os.cpu_count() or 2, replace=True)
    calibration.record(TPCC_KIND, warehouses, result.elapsed_s)
    return result.elapsed_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=10, help="TPC-B calibration scale")
    ap.add_argument("--warehouses", type=int, default=1, help="TPC-C calibration warehouses")
    ap.add_argument("--loaders", nargs="+", choices=LOADERS, default=list(LOADERS))
    ap.add_argument(
        "--sizes", type=int, default=1, help="calibration loads: 1, the size; 2, it and twice it"
    )
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where the cluster goes")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cluster goes too

    os.environ["PGRIG_STATE_DIR"] = tempfile.mkdtemp(prefix="pgrig-bench-calibration-")
    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-estimate-", dir=args.dir))
    base.chmod(0o755)
    cluster = Cluster.create(bins, base / "work", study="bench-estimate", os_user=server_os_user())
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("oltp"))
        cluster.start()
        conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        print(f"PostgreSQL {bins.version}, oltp profile, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for name in args.loaders:
            if name == "tpcc":
                small, big = args.warehouses, 10 * args.warehouses
                t_small = [_tpcc(conn, small * k) for k in range(1, args.sizes + 1)][0]
                estimate = calibration.estimate(TPCC_KIND, big, lambda w: 5 + 3 * w)
                real = _tpcc(conn, big)
            else:
                generate = name.split(":")[1]
                small, big = args.scale, 10 * args.scale
                t_small = [
                    _tpcb(bins, conn, generate, small * k) for k in range(1, args.sizes + 1)
                ][0]
                estimate = load_estimate(TpcbSpec(generate=generate), big)
                real = _tpcb(bins, conn, generate, big)
            print(
                f"{name:<14}: calibrated on {small} ({t_small:.2f} s)"
                f"{f' and {args.sizes - 1} larger' if args.sizes > 1 else ''}; at {big}: estimate "
                f"{estimate:.1f} s, real {real:.1f} s, error {(estimate - real) / real:+.0%}; "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(os.environ["PGRIG_STATE_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
