#!/usr/bin/env python3
"""Load from two hosts against load from one (issue 17, part 5): the numbers of docs/hosts.md.

Three SSH hosts in network namespaces (tests/hosts_fixture.py): a throwaway
server made on h1 through its executor (pgrig.cluster.hosted: scale 1, fsync
off, scram-sha-256 on h1's address, admitting h2 and h3),
pgbench select-only from h2 alone, then from h2 and h3 at once (the waiter's
barrier), alternating the order each round. Per run: tps per host and their
sum, the start spread and its uncertainty, clock offsets, pooled p50/p99, and
each load host's CPU. All "hosts" share this machine's 2 CPUs with the server,
so two load hosts cannot add capacity here: what this shows is that the
machinery works and what it costs, not that more clients scale.

``--workload tpcc``: TPC-C instead (``--warehouses`` loaded once from this
machine, server-side mode, ``--clients`` connections on each load host, every
host driving all the warehouses); per run the tpmC of each host and their sum.

    .venv/bin/python bench/hosts_load.py [--rounds 3] [--duration 5] [--clients 2]
        [--workload tpcb|tpcc] [--warehouses 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hosts_fixture import make_lab, netns_available  # noqa: E402
from pgrig import load
from pgrig.cluster.hosted import HostedServer, ServerSpec  # noqa: E402
from pgrig.conninfo import Conn  # noqa: E402
from pgrig.hosts import inventory, preflight  # noqa: E402
from pgrig.hosts.executor import Executor  # noqa: E402
from pgrig.pgsource import binaries  # noqa: E402
from pgrig.tools.pgbench.run import RunOptions  # noqa: E402
from pgrig.workloads.tpcc import driver, loader  # noqa: E402


class Hosts:
    """The load hosts as a target gives them to a workload (``load.LoadRunner``)."""

    def __init__(self, executors: list[Executor], bin_dir: str, conn: Conn) -> None:
        self.executors, self.bin_dir, self.conn = executors, bin_dir, conn
        self.names = tuple(ex.name for ex in executors)
        self.last: load.MultiLoad | None = None

    def __call__(self, job: load.LoadJob) -> load.MultiLoad:
        logs = Path(tempfile.mkdtemp(prefix="run-", dir=job.log_root))
        conn = job.conn or self.conn
        req = load.LoadRequest(tuple(self.executors), self.bin_dir, conn, job.opts, job.extra)
        self.last = load.run_pgbench(req, logs)
        return self.last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--clients", type=int, default=2, help="pgbench -c on each load host")
    ap.add_argument("--workload", choices=("tpcb", "tpcc"), default="tpcb")
    ap.add_argument("--warehouses", type=int, default=2, help="TPC-C warehouses")
    args = ap.parse_args()
    if why := netns_available():
        print(f"cannot run: {why}", file=sys.stderr)
        return 3
    bins = binaries.find()
    opts = RunOptions(
        mode="select-only",
        clients=args.clients,
        duration_s=args.duration,
        transaction_log=True,
        statement_latencies=False,
    )
    tps: dict[int, list[float]] = {1: [], 2: []}  # tpmC for TPC-C
    spreads: list[float] = []
    with make_lab(3) as lab, tempfile.TemporaryDirectory(prefix="pgrig-hosts-bench-") as tmp:
        hosts = list(inventory.load(lab.write_inventory()).hosts.values())
        base = Path(tmp)
        spec = ServerSpec(
            bin_dir=str(bins.bin_dir),
            address=lab.hosts[0].address,
            bins=bins,
            # the load hosts, and this machine for the TPC-C load
            clients=tuple(
                f"{a}/32" for a in (*(h.address for h in lab.hosts[1:]), lab.bridge_address)
            ),
            settings=(("fsync", "off"),),
        )
        with preflight.opened(hosts) as ex, HostedServer(ex[0], spec) as server:
            conn = server.conn()
            if args.workload == "tpcc":
                loaded = loader.load(conn, args.warehouses, jobs=2)
                print(f"TPC-C: {args.warehouses} warehouses loaded in {loaded.elapsed_s:.1f} s")
            else:
                ex[1].run(
                    [str(bins.bin_dir / "pgbench"), "-i", "-s", "1", "-q", *conn.args()],
                    timeout=300,
                    env={"PGPASSWORD": server.password},
                )
            tpcc = driver.RunOptions(connections=args.clients, threads=1, duration_s=args.duration)
            for r in range(args.rounds):
                for n in (1, 2) if r % 2 == 0 else (2, 1):
                    logs = base / f"logs-{r}-{n}"
                    if args.workload == "tpcc":
                        logs.mkdir()
                        runner = Hosts(ex[1 : 1 + n], str(bins.bin_dir), conn)
                        run, _ = driver.run(bins.bin_dir, conn, tpcc, logs, hosts=runner)
                        assert runner.last is not None
                        got = runner.last
                        per_host = ", ".join(
                            f"{h.host} {driver.host_tpmc(h):,.0f}" for h in got.hosts
                        )
                        print(f"round {r + 1}, {n} load host(s): tpmC {run.tpmc:,.0f} ({per_host})")
                        tps[n].append(run.tpmc)
                    else:
                        req = load.LoadRequest(tuple(ex[1 : 1 + n]), str(bins.bin_dir), conn, opts)
                        got = load.run_pgbench(req, logs)
                        tps[n].append(got.tps)
                    if n == 2:
                        spreads.append(got.start_spread_ms)
                    offsets = ", ".join(
                        f"{o.host} {o.offset_ms:+.3f} +/- {o.uncertainty_ms:.3f} ms"
                        for o in got.offsets
                    )
                    print(f"round {r + 1}, {n} load host(s): {got.describe()}")
                    print(f"    clock offsets: {offsets}", flush=True)
    unit = "tpmC" if args.workload == "tpcc" else "tps"
    for n, values in tps.items():
        print(
            f"{n} load host(s): median {statistics.median(values):,.0f} {unit} "
            f"(min {min(values):,.0f}, max {max(values):,.0f}, n={len(values)})"
        )
    print(
        f"start spread with 2 hosts: median {statistics.median(spreads):.2f} ms "
        f"(max {max(spreads):.2f} ms, n={len(spreads)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
