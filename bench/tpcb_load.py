#!/usr/bin/env python3
"""TPC-B load: pgrig's parallel loader against ``pgbench -i`` (issue 18.1).

On one throwaway cluster (pgrig's own cluster code, ``oltp`` profile), load
each scale with each loader, in an order that rotates every round so the
machine's drift favours none: pgrig's parallel loader as a study runs it
(``--jobs`` connections; the server restarted at ``wal_level = minimal`` for
the load and back, both restarts timed), the same at the profile's WAL
settings (``pgrig profile WAL``: what it does on a server it may not restart)
and with one connection (``pgrig 1 job``, at the profile's WAL),
``pgbench -i -I dtgvp`` (client-side generation), ``pgbench -i -I dtGvp``
(server-side), and ``pgbench minimal WAL``: client-side ``pgbench -i`` with
the same two restarts, to show what the WAL level alone is worth. A
``CHECKPOINT`` (not timed) follows every load, so the next starts clean.

Prints every load with its steps, then per scale and loader the median time
and rows/s (accounts rows / the whole load, drop to primary keys) with their
range, and the speed-up over each pgbench mode: the median of the rounds'
ratios, with their range. Goal on 2 cores: >= 1.8x.

    .venv/bin/python bench/tpcb_load.py [--scales 100 400] [--rounds 3] [--jobs N]
        [--partitions 0] [--set shared_buffers=2GB]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pgrig.cluster import loadwal, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.results import PgbenchInit
from pgrig.tools import pgbench
from pgrig.workloads.tpcb import loader

LOADERS = (
    "pgrig",
    "pgrig profile WAL",
    "pgrig 1 job",
    "pgbench client",
    "pgbench server",
    "pgbench minimal WAL",
)
REFERENCES = ("pgbench client", "pgbench server", "pgbench minimal WAL")
OURS = ("pgrig", "pgrig profile WAL", "pgrig 1 job")


def _load(name: str, bins: binaries.PgBinaries, cluster: Cluster, conn: Conn, scale: int,
          args: argparse.Namespace) -> PgbenchInit:  # fmt: skip
    if name.startswith("pgrig"):
        opts = pgbench.InitOptions(scale=scale, generate="parallel", partitions=args.partitions)
        jobs = 1 if name == "pgrig 1 job" else args.jobs
        minimal = cluster if name == "pgrig" else None
        return loader.load(bins.client_bin_dir, conn, opts, jobs, minimal_wal=minimal)[0]
    generate = "server" if name == "pgbench server" else "client"
    opts = pgbench.InitOptions(scale=scale, generate=generate, partitions=args.partitions)  # type: ignore[arg-type]
    if name != "pgbench minimal WAL":
        return pgbench.run_init(bins.client_bin_dir, conn, opts)[0]
    steps: dict[str, float] = {}
    with loadwal.minimal_wal(cluster, steps):
        result = pgbench.run_init(bins.client_bin_dir, conn, opts)[0]
    return replace(result, steps={**result.steps, **steps}, wal_level=loadwal.MINIMAL)


def _spread(values: list[float], fmt: str) -> str:
    return (
        f"{format(statistics.median(values), fmt)} "
        f"({format(min(values), fmt)}-{format(max(values), fmt)}, n={len(values)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[100, 400])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--partitions", type=int, default=0)
    ap.add_argument("--loaders", nargs="+", choices=LOADERS, default=list(LOADERS))
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where the cluster goes")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cluster goes too

    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-tpcb-load-", dir=args.dir))
    base.chmod(0o755)
    cluster = Cluster.create(bins, base / "work", study="bench-tpcb-load", os_user=server_os_user())
    overrides = dict(item.split("=", 1) for item in args.overrides)
    try:
        cluster.initdb(InitdbOptions())
        cluster.configure(profiles.load("oltp").with_overrides(overrides))
        cluster.start()
        conn = Conn.socket(str(cluster.socket_dir), cluster.port, SUPERUSER, "postgres")
        print(
            f"PostgreSQL {bins.version}, oltp profile + {overrides}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f} at the start; scales {args.scales}, "
            f"{args.rounds} rounds, pgrig --jobs {args.jobs}, partitions {args.partitions}",
            flush=True,
        )
        for scale in args.scales:
            loaders = tuple(args.loaders)
            seconds: dict[str, list[float]] = {name: [] for name in loaders}
            pairs = [(ours, ref) for ours in loaders if ours in OURS
                     for ref in REFERENCES if ref in loaders]  # fmt: skip
            ratios: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
            for rnd in range(args.rounds):
                shift = rnd % len(loaders)
                order = loaders[shift:] + loaders[:shift]
                took: dict[str, float] = {}
                for name in order:
                    t0 = time.monotonic()
                    result = _load(name, bins, cluster, conn, scale, args)
                    took[name] = time.monotonic() - t0
                    seconds[name].append(took[name])
                    steps = ", ".join(f"{k} {v:.2f} s" for k, v in result.steps.items())
                    print(
                        f"scale {scale} round {rnd + 1} {name:<15}: {took[name]:7.2f} s, "
                        f"{result.rows / took[name]:>10,.0f} rows/s ({steps}); "
                        f"load average {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    with conn.connect() as db:
                        db.execute("CHECKPOINT")
                for ours, ref in ratios:
                    ratios[ours, ref].append(took[ref] / took[ours])
            rows = scale * pgbench.ROWS_PER_SCALE
            for name, values in seconds.items():
                rates = [rows / s for s in values]
                print(f"scale {scale} {name:<15}: {_spread(values, '.2f')} s, "
                      f"{_spread(rates, ',.0f')} rows/s")  # fmt: skip
            for (ours, ref), values in ratios.items():
                print(f"scale {scale} {ours} speed-up over {ref}: {_spread(values, '.2f')}x")
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
