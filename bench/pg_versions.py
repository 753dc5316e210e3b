#!/usr/bin/env python3
"""PostgreSQL majors on one machine: what installing each costs, and a first look at
select-only throughput across majors (docs/versions.md quotes the numbers).

1. ``--downloads``: installs every major into an empty temporary cache (the
   real registries), printing size, download time and total install time
   (download + checksum + unpack + ``postgres --version``). The cache is removed.
2. tps: for each major given, a cluster by pgrig's cluster code (stock profile),
   ``pgbench -i -s 1``, then ``pgbench -S -c 2 -j 2 -T D`` with the newest pgbench,
   in rotating order over ``--rounds`` rounds; medians and spread.

    .venv/bin/python bench/pg_versions.py --downloads
    .venv/bin/python bench/pg_versions.py --versions 9.6,15,18 --rounds 3 --duration 10

A few seconds at scale 1 on a shared 2-core machine: noisy, and a statement about
this machine only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pgrig import proc
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.pgsource import binaries, cache, catalog
from pgrig.pgsource.fetch import Http

MAJORS = ("9.5", "9.6", "10", "11", "12", "13", "14", "15", "16", "17", "18")


def downloads() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="pgrig-bench-cache-"))
    http = Http()
    offered, problems = catalog.obtainable(http)
    if problems:
        print("not asked:", problems)
    print(f"{'major':6} {'release':8} {'source':24} {'MB':>6} {'download s':>10} {'install s':>9}")
    try:
        for major in MAJORS:
            pick = catalog.choose(catalog.Spec.parse(major), offered)
            if pick is None:
                print(f"{major:6} not offered")
                continue
            marks: list[float] = []

            def progress(done: int, total: int | None, marks: list[float] = marks) -> None:
                marks.append(time.monotonic())

            started = time.monotonic()
            done = cache.install(
                pick,
                catalog._source(pick.source),
                http,
                cache_root=scratch / "postgres",
                on_progress=progress,
            )
            total = time.monotonic() - started
            size = (done.size or 0) / 2**20
            print(
                f"{major:6} {done.version:8} {done.source:24} {size:6.1f} "
                f"{marks[-1] - marks[0]:10.2f} {total:9.2f}"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def tps(specs: list[str], rounds: int, duration: int) -> None:
    clusters: dict[str, Cluster] = {}
    bases: list[Path] = []
    results: dict[str, list[float]] = {s: [] for s in specs}
    try:
        for spec in specs:
            bins = binaries.find(spec)
            base = Path(tempfile.mkdtemp(prefix="pgrig-bench-v-", dir="/var/tmp"))
            base.chmod(0o755)
            bases.append(base)
            c = Cluster.create(bins, base / "work", study="bench", os_user=server_os_user())
            clusters[spec] = c
            c.initdb(InitdbOptions())
            c.configure(profiles.load("stock"))
            c.start()
            proc.run([bins.path("pgbench"), "-i", "-s", "1", "-q", *args(c)], timeout=120)
            c.stop()
        for r in range(rounds):
            order = specs[r % len(specs) :] + specs[: r % len(specs)]
            for spec in order:
                c = clusters[spec]
                c.start()  # one server at a time: they share 2 cores
                try:
                    out = proc.run(
                        [c.bins.path("pgbench"), "-S", "-n", "-c", "2", "-j", "2"]
                        + ["-T", str(duration), *args(c)],
                        timeout=duration + 60,
                    ).stdout
                finally:
                    c.stop()
                m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
                assert m, out
                results[spec].append(float(m.group(1)))
                print(f"round {r + 1} {spec:4} {c.bins.version:8} {float(m.group(1)):10.0f} tps")
        pgb = {s: clusters[s].bins.path("pgbench") for s in specs}
        print(f"\nmedian over {rounds} rounds (pgbench -S -c 2 -j 2 -T {duration}, scale 1):")
        for spec in specs:
            vals = results[spec]
            print(
                f"  {clusters[spec].bins.version:8} median {statistics.median(vals):8.0f} tps, "
                f"min {min(vals):.0f}, max {max(vals):.0f}  (pgbench {pgb[spec]})"
            )
    finally:
        for c in clusters.values():
            c.destroy()
        for base in bases:
            shutil.rmtree(base, ignore_errors=True)


def args(c: Cluster) -> list[str]:
    return ["-h", str(c.socket_dir), "-p", str(c.port), "-U", SUPERUSER, "postgres"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--downloads", action="store_true")
    parser.add_argument("--versions", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    opts = parser.parse_args()
    if opts.downloads:
        downloads()
    if opts.versions:
        tps([v for v in opts.versions.split(",") if v], opts.rounds, opts.duration)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main())
