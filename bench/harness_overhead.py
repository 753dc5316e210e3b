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

``--costs`` answers where the overhead goes in CPU time, which a loaded machine
does not distort the way it distorts tps: plain pgbench, then with ``-P 1``,
with ``-r``, with pgrig's sampled ``-l`` (and pgrig's parsing of that log), and
pgrig's step without and with the monitor, each timed by resource usage:
pgbench's CPU per transaction (``RUSAGE_CHILDREN``), pgrig's own CPU per second
of run (``RUSAGE_SELF``: progress parsing, the console, the log's parsing, the
monitor's thread) and the monitor's server backend (``/proc/<pid>/stat``); plus
one redraw of the console's progress line, timed in-process.

    .venv/bin/python bench/harness_overhead.py [--rounds 6] [--duration 20]
    .venv/bin/python bench/harness_overhead.py --costs [--rounds 3] [--duration 15]
"""

from __future__ import annotations

import argparse
import io
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from pgrig import monitor, proc, registry
from pgrig.cluster import profiles
from pgrig.cluster.server import SUPERUSER, Cluster, InitdbOptions, server_os_user
from pgrig.conninfo import Conn
from pgrig.pgsource import binaries
from pgrig.plan import PlannedTarget
from pgrig.policy import RunPolicy
from pgrig.step import Context
from pgrig.tools import pgbench
from pgrig.tools.pgbench import txlog
from pgrig.ui import REFRESH_PER_SECOND, Ui
from pgrig.workloads.tpcb import steps as tpcb
from pgrig.workloads.tpcb.spec import TpcbSpec

TPS = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)", re.M)
PROCESSED = re.compile(r"^number of transactions actually processed: (\d+)", re.M)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _pid_cpu(pid: int) -> float:
    """CPU seconds of one process (user + system), from /proc; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Cost:
    """One run, timed by resource usage: tps, transactions, pgbench's CPU (its
    threads, waited for by this process), pgrig's own CPU over the run, the
    monitor's server backend, and the per-transaction log's parsing."""

    tps: float
    transactions: int
    pgbench_s: float
    pgrig_s: float = 0.0
    backend_s: float = 0.0
    parse_s: float = 0.0


def raw_pgbench(
    bins: binaries.PgBinaries,
    conn: Conn,
    clients: int,
    threads: int,
    duration: int,
    extra: list[str],
) -> Cost:
    with conn.connect() as db:
        db.execute("CHECKPOINT")
    argv = [bins.path("pgbench"), "-M", "prepared", "-n", *extra, "-S"]
    argv += ["-c", str(clients), "-j", str(threads), "-T", str(duration), *conn.args()]
    before = _cpu(resource.RUSAGE_CHILDREN)
    out = proc.run(argv, timeout=duration + 120).stdout
    spent = _cpu(resource.RUSAGE_CHILDREN) - before
    match, count = TPS.search(out), PROCESSED.search(out)
    if not match or not count:
        sys.exit(f"raw pgbench printed no tps line:\n{out}")
    return Cost(float(match.group(1)), int(count.group(1)), spent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--target", type=Path, default=Path("/var/tmp"))
    ap.add_argument(
        "--costs",
        action="store_true",
        help="where pgrig's overhead goes, in CPU time per transaction and per second",
    )
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
            tpcb.Point(args.duration, "select-only", args.clients, None),
            RunPolicy(),
            PlannedTarget("bench"),
            1,
        )

        own_cpu: dict[str, list[float]] = {}

        def through_pgrig(*, watched: bool = True) -> Cost:
            # What the campaign runner does for a measured run: prepare (CHECKPOINT),
            # then the run inside the monitor's sampling window. pgrig's own CPU
            # (all its threads: progress parsing, the monitor's sampling) is
            # counted over the run and the log's parsing, not the CHECKPOINT.
            name = "pgrig" if watched else "pgrig-nomon"
            backend_s = 0.0
            with ui.step(step.label, total=step.total) as line:
                if step.prepare is not None:
                    registry.resolve(step.prepare)(ctx, line)
                before, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
                if watched:
                    with monitor.Watch(ctx) as watch:
                        backend = watch.backend_pid
                        backend_s = -_pid_cpu(backend) if backend else 0.0
                        result, _ = registry.resolve(step.action)(ctx, line)
                        backend_s += _pid_cpu(backend) if backend else 0.0
                    watch.result(result)
                else:
                    result, _ = registry.resolve(step.action)(ctx, line)
                cpu = _cpu(resource.RUSAGE_SELF) - before
                pgbench_s = _cpu(resource.RUSAGE_CHILDREN) - children
            own_cpu.setdefault(name, []).append(cpu / args.duration)
            return Cost(float(result.tps), result.transactions, pgbench_s, cpu, backend_s)

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
            f"{args.duration} s per run, {args.rounds} rounds, PostgreSQL {bins.version}; "
            f"load average {_load()}"
        )
        if args.costs:

            def logged() -> Cost:
                cost = raw_pgbench(bins, conn, args.clients, threads, args.duration, log_args)
                files = pgbench.transaction_log_files(log_dir, "tx")
                started = time.process_time()
                txlog.parse_transaction_logs(files, rate)
                return replace(cost, parse_s=time.process_time() - started)

            costs(
                {
                    "plain": arms["plain"],
                    "-P 1": lambda: raw_pgbench(
                        bins, conn, args.clients, threads, args.duration, ["-P", "1"]
                    ),
                    "-r": lambda: raw_pgbench(
                        bins, conn, args.clients, threads, args.duration, ["-r"]
                    ),
                    "-l sampled": logged,
                    "pgrig-nomon": lambda: through_pgrig(watched=False),
                    "pgrig": through_pgrig,
                },
                args,
                log_dir,
                redraw_ms(ui),
            )
            return
        vs_seed, vs_plain = [], []
        ratios: dict[str, list[float]] = {}
        names = list(arms)
        for i in range(args.rounds):
            order = names[i % len(names) :] + names[: i % len(names)]
            tps = {name: arms[name]().tps for name in order}
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
        shutil.rmtree(base, ignore_errors=True)


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def redraw_ms(ui: Ui) -> tuple[float, float]:
    """CPU ms of one redraw of a step's progress line, to a terminal and to a
    file (rich builds the line's table at every refresh either way)."""
    out = []
    for terminal in (True, False):
        console = Console(file=io.StringIO(), force_terminal=terminal, width=100)
        with Ui(console=console).step("local: select-only -s 10 -c 2 -j 2", total=20) as line:
            line.update(completed=5, detail="12,345 tps")
            started = time.process_time()
            for _ in range(200):
                line.redraw()
            out.append((time.process_time() - started) / 200 * 1000)
    return out[0], out[1]


def costs(
    arms: dict[str, Callable[[], Cost]],
    args: argparse.Namespace,
    log_dir: Path,
    redraw: tuple[float, float],
) -> None:
    """Each arm once per round, rotating; then the medians and the breakdown."""
    names = list(arms)
    runs: dict[str, list[Cost]] = {name: [] for name in names}
    for i in range(args.rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            runs[name].append(arms[name]())
            for f in log_dir.iterdir():
                f.unlink()
        print(
            f"round {i + 1}: "
            + "  ".join(f"{n} {runs[n][-1].tps:,.0f} tps" for n in names)
            + f"; load average {_load()}",
            flush=True,
        )

    def med(name: str, value: Callable[[Cost], float]) -> float:
        return statistics.median(value(c) for c in runs[name])

    def spread(name: str, value: Callable[[Cost], float], fmt: str) -> str:
        values = [value(c) for c in runs[name]]
        return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"

    def per_txn(c: Cost) -> float:
        return c.pgbench_s / max(1, c.transactions) * 1e6

    def per_s(seconds: Callable[[Cost], float]) -> Callable[[Cost], float]:
        return lambda c: seconds(c) / args.duration * 1000

    print(
        f"{'arm':<12} {'tps':>22} {'pgbench CPU us/txn':>22} {'pgrig CPU ms/s':>20} "
        f"{'monitor backend ms/s':>20} {'log parse ms/s':>16}"
    )
    for name in names:
        print(
            f"{name:<12} {spread(name, lambda c: c.tps, ',.0f'):>22} "
            f"{spread(name, per_txn, '.2f'):>22} "
            f"{spread(name, per_s(lambda c: c.pgrig_s), '.2f'):>20} "
            f"{spread(name, per_s(lambda c: c.backend_s), '.2f'):>20} "
            f"{spread(name, per_s(lambda c: c.parse_s), '.2f'):>16}"
        )
    # Each cost as ms of CPU per second of run at pgrig's own tps, and that as a
    # share of the machine: what it takes from the server on a CPU-bound machine.
    tps = med("pgrig", lambda c: c.tps)
    ncpu = os.cpu_count() or 1
    plain = med("plain", per_txn)
    parts = {
        "-P 1 in pgbench": (med("-P 1", per_txn) - plain) * tps / 1000,
        "-r in pgbench": (med("-r", per_txn) - plain) * tps / 1000,
        "-l (sampled) in pgbench": (med("-l sampled", per_txn) - plain) * tps / 1000,
        "parsing the -l log in pgrig": med("-l sampled", per_s(lambda c: c.parse_s)),
        "pgrig without the monitor (progress, console, log parse)": med(
            "pgrig-nomon", per_s(lambda c: c.pgrig_s)
        ),
        "the monitor in pgrig": med("pgrig", per_s(lambda c: c.pgrig_s))
        - med("pgrig-nomon", per_s(lambda c: c.pgrig_s)),
        "the monitor's server backend": med("pgrig", per_s(lambda c: c.backend_s)),
    }
    print(f"where it goes, ms of CPU per second of run at {tps:,.0f} tps ({ncpu} CPUs):")
    for what, ms in parts.items():
        print(f"  {what:<58} {ms:7.2f} ms/s  {ms / 10 / ncpu:6.3f}% of the machine")
    terminal, piped = redraw
    print(
        f"  one redraw of the progress line: {terminal:.2f} ms to a terminal, {piped:.2f} ms "
        f"to a file; at {REFRESH_PER_SECOND:g} redraws/s {terminal * REFRESH_PER_SECOND:.2f} "
        f"ms/s in a terminal"
    )


if __name__ == "__main__":
    main()
