#!/usr/bin/env python3
"""Does pgrig's harness cost anything measurable? (core issue benchmark)

On one throwaway cluster (pgrig's own cluster code, ``oltp`` profile), load
TPC-B at scale S once, then run the same select-only workload three ways, in
rotating order within each round so slow drift of the machine favours none:

* seed:  ``pgbench -M prepared -n -r -P 1 -S -c C -j J -T D``, the command
  line of the seed studies (per-statement latencies and progress on);
* plain: ``pgbench -M prepared -n -S -c C -j J -T D``, nothing extra;
* pgrig: the study's own step - CHECKPOINT, then pgbench with ``-r -P 1`` and
  a sampled per-transaction log, streamed through pgrig's parsers and
  progress callbacks, with the monitor sampling host and server once a second.

Prints every round, then the median ratios ``pgrig_tps / pgbench_tps``
against the seed command line (the goal: >= 0.99) and, for transparency,
against plain pgbench (what ``-r`` and ``-P`` cost pgbench itself).

    .venv/bin/python bench/harness_overhead.py [--rounds 6] [--duration 20]
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from pgrig import monitor, proc
from pgrig.cluster import binaries, profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.plan import PlannedTarget
from pgrig.policy import RunPolicy
from pgrig.step import Context
from pgrig.tools import pgbench
from pgrig.ui import Ui
from pgrig.workloads.tpcb import steps as tpcb
from pgrig.workloads.tpcb.spec import TpcbSpec

TPS = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)", re.M)


def raw_pgbench(
    bins: binaries.PgBinaries,
    conn: Conn,
    clients: int,
    threads: int,
    duration: int,
    extra: list[str],
) -> float:
    with conn.connect() as db:
        db.execute("CHECKPOINT")
    argv = [bins.path("pgbench"), "-M", "prepared", "-n", *extra, "-S"]
    argv += ["-c", str(clients), "-j", str(threads), "-T", str(duration), *conn.args()]
    out = proc.run(argv, timeout=duration + 120).stdout
    match = TPS.search(out)
    if not match:
        sys.exit(f"raw pgbench printed no tps line:\n{out}")
    return float(match.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--target", type=Path, default=Path("/var/tmp"))
    ap.add_argument(
        "--decompose",
        action="store_true",
        help="also run pgrig without the monitor and pgbench with pgrig's transaction log",
    )
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
        spec = TpcbSpec(
            scales=(args.scale,),
            clients=(args.clients,),
            durations=(args.duration,),
            modes=("select-only",),
        )
        threads = tpcb.threads_for(None, args.clients)
        pgbench.run_init(bins.bin_dir, conn, pgbench.InitOptions(scale=args.scale))
        ctx = Context(
            bins=bins,
            target=base,
            scratch=cluster.workdir,
            conn=conn,
            server_pid=cluster.postmaster_pid(),
        )
        step = tpcb.bench_step(
            spec,
            args.scale,
            (args.duration, "select-only", args.clients),
            RunPolicy(),
            PlannedTarget("bench"),
            1,
        )

        own_cpu: dict[str, list[float]] = {}

        def through_pgrig(*, watched: bool = True) -> float:
            # What the campaign runner does for a measured run: prepare (CHECKPOINT),
            # then the run inside the monitor's sampling window. pgrig's own CPU
            # (all its threads: progress parsing, the monitor's sampling) is
            # counted over the run and the log's parsing, not the CHECKPOINT.
            name = "pgrig" if watched else "pgrig-nomon"
            with ui.step(step.label, total=step.total) as line:
                if step.prepare is not None:
                    step.prepare(ctx, line)
                before = resource.getrusage(resource.RUSAGE_SELF)
                if watched:
                    with monitor.Watch(ctx) as watch:
                        result, _ = step.action(ctx, line)
                    watch.result(result)
                else:
                    result, _ = step.action(ctx, line)
                after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            own_cpu.setdefault(name, []).append(cpu / args.duration)
            return float(result.tps)

        # The per-transaction log as pgrig asks for it, on pgbench alone.
        rate = pgbench.log_sampling_rate(
            pgbench.RunOptions(duration_s=args.duration, sampling_rate="auto")
        )
        log_dir = Path(tempfile.mkdtemp(prefix="txlog-", dir=base))
        log_dir.chmod(0o777)
        log_args = ["-l", f"--log-prefix={log_dir}/tx", f"--sampling-rate={rate:g}"]
        seed_args = ["-r", "-P", "1"]
        arms = {
            "seed": lambda: raw_pgbench(
                bins, conn, args.clients, threads, args.duration, seed_args
            ),
            "plain": lambda: raw_pgbench(bins, conn, args.clients, threads, args.duration, []),
            "pgrig": through_pgrig,
        }
        if args.decompose:
            # Where pgrig's cost goes: the same step without the monitor, and the
            # seed command line plus the transaction log pgrig adds (-l, sampled).
            arms["pgrig-nomon"] = lambda: through_pgrig(watched=False)
            arms["seed+log"] = lambda: raw_pgbench(
                bins, conn, args.clients, threads, args.duration, seed_args + log_args
            )

        print(
            f"select-only, scale {args.scale}, -c {args.clients} -j {threads}, "
            f"{args.duration} s per run, {args.rounds} rounds, PostgreSQL {bins.version}"
        )
        vs_seed, vs_plain = [], []
        ratios: dict[str, list[float]] = {}
        names = list(arms)
        for i in range(args.rounds):
            order = names[i % len(names) :] + names[: i % len(names)]
            tps = {name: arms[name]() for name in order}
            for f in log_dir.iterdir():
                f.unlink()
            vs_seed.append(tps["pgrig"] / tps["seed"])
            vs_plain.append(tps["pgrig"] / tps["plain"])
            for name in names:
                ratios.setdefault(name, []).append(tps[name] / tps["seed"])
            print(
                f"round {i + 1}: "
                + "  ".join(f"{n} {tps[n]:9,.0f}" for n in names)
                + f"  pgrig/seed {vs_seed[-1]:.3f}  pgrig/plain {vs_plain[-1]:.3f}",
                flush=True,
            )

        def summary(values: list[float]) -> str:
            return (
                f"median {statistics.median(values):.3f} "
                f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"
            )

        print(f"pgrig_tps / pgbench_tps (seed command line): {summary(vs_seed)}")
        print(f"pgrig_tps / pgbench_tps (plain pgbench):     {summary(vs_plain)}")
        for name in names[3:]:
            print(f"{name + ' / seed:':<44} {summary(ratios[name])}")
        for name, values in own_cpu.items():
            print(f"{name + ' own CPU, cores per second of run:':<44} {summary(values)}")
        print(
            "goal >= 0.99 against the seed command line:",
            "met" if statistics.median(vs_seed) >= 0.99 else "NOT met",
        )
    finally:
        cluster.destroy()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
