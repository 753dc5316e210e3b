#!/usr/bin/env python3
"""What does the lossy FUSE filesystem cost PostgreSQL? (issue 11 benchmark)

Two throwaway clusters (pgrig's cluster code, ``stock`` profile, fsync=on,
synchronous_commit=on) in the same directory of the same disk: one in a plain
directory, one on a lossy mount whose backing directory sits next to it. Loads
pgbench scale S in each, then runs ``pgbench -S`` (select only) and TPC-B with C
clients for D seconds, alternating plain/lossy (order flipped every round so a
drifting shared machine favours neither). Prints every run, then per workload
the median tps of each side and the per-round ratio lossy / plain as its median
and range (the spread: one round's ratio is only as good as the machine's noise).

    .venv/bin/python bench/lossyfs_overhead.py [--rounds 4] [--duration 10] [--clients 2]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
from pathlib import Path

from pgrig import lossyfs, proc
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.lossyfs import LossyMount
from pgrig.pgsource import binaries

TPS = re.compile(r"^tps = ([0-9.]+) \(without initial connection time\)", re.M)


def make_cluster(bins: binaries.PgBinaries, where: Path, study: str) -> Cluster:
    cluster = Cluster.create(bins, where, study=study, os_user=server_os_user())
    cluster.initdb(InitdbOptions())
    cluster.configure(profiles.load("stock").with_overrides({"synchronous_commit": "on"}))
    cluster.start()
    return cluster


def pgbench(cluster: Cluster, *args: str, timeout: float) -> str:
    argv = [
        cluster.bins.path("pgbench"),
        "-h",
        str(cluster.socket_dir),
        "-p",
        str(cluster.port),
        "-U",
        SUPERUSER,
        *args,
        "postgres",
    ]
    return proc.run(argv, timeout=timeout, what="pgbench").stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--metadata", choices=lossyfs.METADATA_MODELS, default="journal")
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"))
    opts = ap.parse_args()
    reason = lossyfs.available()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    bins = binaries.find()
    base = Path(tempfile.mkdtemp(prefix="pgrig-bench-lossyfs-", dir=opts.dir))
    base.chmod(0o755)
    (base / "backing").mkdir()
    mount = LossyMount(base / "backing", base / "mnt", metadata=opts.metadata)
    clusters: dict[str, Cluster] = {}
    try:
        mount.start()
        clusters["plain"] = make_cluster(bins, base / "plain", "bench-plain")
        clusters["lossy"] = make_cluster(bins, mount.mountpoint / "work", "bench-lossy")
        for cluster in clusters.values():
            pgbench(cluster, "-i", "-q", "-s", str(opts.scale), timeout=600)
        results: dict[tuple[str, str], list[float]] = {}
        for rnd in range(opts.rounds):
            order = ["plain", "lossy"] if rnd % 2 == 0 else ["lossy", "plain"]
            for workload, extra in (("select-only", ["-S"]), ("tpcb", [])):
                for name in order:
                    out = pgbench(
                        clusters[name],
                        *extra,
                        "-n",
                        "-M",
                        "prepared",
                        "-c",
                        str(opts.clients),
                        "-j",
                        str(opts.clients),
                        "-T",
                        str(opts.duration),
                        timeout=opts.duration + 120,
                    )
                    match = TPS.search(out)
                    assert match, out
                    tps = float(match.group(1))
                    results.setdefault((workload, name), []).append(tps)
                    print(f"round {rnd + 1} {workload:12} {name:6} {tps:10.1f} tps", flush=True)
        print(
            f"\n{opts.rounds} rounds, {opts.clients} clients, {opts.duration} s, "
            f"scale {opts.scale}:"
        )
        for workload in ("select-only", "tpcb"):
            plain = results[(workload, "plain")]
            lossy = results[(workload, "lossy")]
            ratios = [b / a for a, b in zip(plain, lossy, strict=True)]
            print(
                f"  {workload:12} plain {statistics.median(plain):10.1f}  "
                f"lossy {statistics.median(lossy):10.1f}  ratio lossy/plain "
                f"{statistics.median(ratios):.2f} (range {min(ratios):.2f} - {max(ratios):.2f})"
            )
        print("lossy mount counters:", mount.stats())
    finally:
        for cluster in clusters.values():
            cluster.destroy()
        mount.unmount()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
