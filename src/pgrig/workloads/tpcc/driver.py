"""Timed TPC-C runs: pgbench drives the five transactions as weighted scripts.

``-f new_order.sql@45 -f payment.sql@43 -f order_status.sql@4 -f delivery.sql@4
-f stock_level.sql@4``: pgbench picks a script per transaction by weight, so the
mix is the specification's (clause 5.2.3) and the driver is pgbench's C loop.
Two modes share the scripts' random inputs (NURand in pgbench expressions):

* ``server``: each script is one ``SELECT tpcc.<transaction>(...)`` - one round
  trip per transaction, the work in PL/pgSQL (``sql/functions.sql``);
* ``client``: each script is BEGIN, the transaction's statements one round
  trip at a time with ``\\gset`` carrying values between them, COMMIT.

Counts come from pgbench's own report (one block per script, with
``--failures-detailed`` and ``--max-tries`` for serialization failures and
deadlocks, which are retried); latency percentiles per type and tpmC over time
from its per-transaction log, whose fourth column is the script number.
Expected New-Order rollbacks are counted as completed (clause 2.4.2.3): their
number is the New-Orders pgbench completed minus the orders they created.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgrig import proc
from pgrig.clients import Clients, OneHost
from pgrig.conninfo import Conn
from pgrig.errors import ParseError, ToolError, UsageError
from pgrig.load import HostLoad, LoadJob, MultiLoad, merged
from pgrig.monitor.client import ClientWatch, check_duration
from pgrig.results import PgbenchRun, ProgressPoint
from pgrig.tools import pgbench
from pgrig.tools.pgbench import txlog
from pgrig.workloads.tpcc import checks, sqlfiles
from pgrig.workloads.tpcc.loader import check_connections
from pgrig.workloads.tpcc.model import (
    ISOLATIONS,
    MODES,
    TRANSACTIONS,
    WEIGHTS,
    TpccRun,
    TpmPoint,
    TxnStats,
    active_share,
)

LOG_TARGET = 500_000
"""Log about this many transactions per run at most (sampling above it)."""
TPS_GUESS = 5_000.0  # the first run's, before any was measured


@dataclass(frozen=True)
class RunOptions:
    mode: str = "server"
    connections: int = 4
    threads: int | None = None  # None: min(connections, CPUs)
    duration_s: int = 60
    warehouses: int | None = None  # the count the caller expects loaded; None: any
    active: int | None = None  # the first K warehouses; None: all
    isolation: str = "read committed"
    max_tries: int = 10
    progress_interval: int = 1
    rate: float | None = None  # open loop: pgbench -R, transactions of all types per second

    def validate(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"--mode {self.mode!r}: must be server or client")
        if self.isolation not in ISOLATIONS:
            raise UsageError(
                f"--isolation {self.isolation!r}: must be one of {', '.join(ISOLATIONS)}"
            )
        for option, value in (
            ("--connections", self.connections),
            ("--duration", self.duration_s),
            ("--max-tries", self.max_tries),
        ):
            if value < 1:
                raise UsageError(f"{option} {value}: must be at least 1")
        if self.threads is not None and not 1 <= self.threads <= self.connections:
            raise UsageError(
                f"--threads {self.threads}: must be between 1 and --connections "
                f"({self.connections})",
                hint="pgbench needs at least one connection per thread",
            )
        if self.warehouses is not None and self.warehouses < 1:
            raise UsageError(f"--warehouses {self.warehouses}: must be at least 1")
        if self.active is not None and self.active < 1:
            raise UsageError(f"--active {self.active}: must be at least 1")

    @property
    def pgbench_threads(self) -> int:
        if self.threads is not None:
            return self.threads
        return max(1, min(self.connections, os.cpu_count() or 1))


@dataclass(frozen=True)
class RunFacts:
    """What a TPC-C run's result holds besides pgbench's output: its options,
    the data it ran on, how its log was sampled, the orders it created."""

    opts: RunOptions
    warehouses: int
    active: int
    sampling_rate: float
    orders_created: int | None  # None: not counted (a parse of captured output)
    pgbench_version: str = ""
    loaded_bytes: int | None = None


@dataclass(frozen=True)
class Streamed:
    """What pgbench said while it ran on this machine."""

    done: proc.Completed
    lines: tuple[str, ...]  # stdout and stderr lines in arrival order
    progress: tuple[ProgressPoint, ...]  # tps per second, stored with the run

    def raw(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def run_constant(c_load: int) -> int:
    """C for C_LAST at run time: |C_run - C_load| in [65, 119], not 96 or 112 (2.1.6.1)."""
    allowed = [c for c in range(256) if 65 <= abs(c - c_load) <= 119 and abs(c - c_load) % 16]
    # 96 and 112 are the only multiples of 16 in [65, 119].
    return random.choice(allowed)


def with_isolation(conn: Conn, isolation: str) -> Conn:
    """The connection with ``default_transaction_isolation`` set for every session,
    pgbench's included (libpq ``options``; a space is escaped with a backslash)."""
    if isolation == "read committed":
        return conn
    options = conninfo_to_dict(conn.dsn).get("options") or ""
    extra = "-c default_transaction_isolation=" + isolation.replace(" ", "\\ ")
    return Conn(make_conninfo(conn.dsn, options=f"{options} {extra}".strip()))


def prepare(conn: Conn, opts: RunOptions, hosts: int = 1) -> tuple[checks.Loaded, int]:
    """Everything that can be refused before pgbench starts; returns what was
    loaded and the number of warehouses the run uses. ``hosts``: load hosts
    each opening ``opts.connections``."""
    opts.validate()
    with conn.connect() as db:
        info = checks.loaded(db)
        if opts.warehouses is not None and opts.warehouses != info.warehouses:
            raise UsageError(
                f"--warehouses {opts.warehouses}: the database holds {info.warehouses} "
                "loaded warehouses",
                hint=f"run with --warehouses {info.warehouses} (or --active K to use "
                f"the first K), or load {opts.warehouses} with pgrig tpcc load --yes",
            )
        active = opts.active or info.warehouses
        if active > info.warehouses:
            raise UsageError(
                f"--active {active}: only {info.warehouses} warehouses are loaded",
                hint=f"use --active {info.warehouses} or less",
            )
        check_connections(db, opts.connections * hosts, "--connections")
    return info, active


def run(
    bin_dir: Path | str,
    conn: Conn,
    opts: RunOptions,
    workdir: Path,
    on_progress: Callable[[ProgressPoint], None] | None = None,
    expected_tps: float | None = None,
    clients: Clients | None = None,
) -> tuple[TpccRun, str]:
    """One timed run from ``clients`` (a target's: ``Context.clients``; None:
    pgbench from ``bin_dir`` on this machine); returns the result and pgbench's
    output (stdout and stderr lines in arrival order). The scripts and logs live
    in a private directory under ``workdir``, removed afterwards. The transaction
    log is sampled for ``expected_tps`` (an earlier run's), else for ``TPS_GUESS``.

    Clients on several hosts each run ``opts.connections`` connections, every
    host driving all the active warehouses (the scripts draw a warehouse per
    transaction, so the hosts' pooled mix is one host's with all their
    connections); the result is the merged run (``merged_result``) and the
    output every host's."""
    clients = clients or OneHost(bin_dir)
    info, active = prepare(conn, opts, len(clients.names))
    version = pgbench.pgbench_version(bin_dir)
    tps = expected_tps if expected_tps and expected_tps > 0 else TPS_GUESS
    rate = max(1e-4, min(1.0, float(f"{LOG_TARGET / (tps * opts.duration_s):.3g}")))
    scratch = Path(tempfile.mkdtemp(prefix="pgrig-tpcc-", dir=workdir))
    try:
        paths = sqlfiles.write_scripts(opts.mode, scratch)
        bench_opts = _bench_options(opts, paths, rate, active, info)
        target = with_isolation(conn, opts.isolation)
        with conn.connect() as db:
            # Counted before the run, so that an interrupted one counts too.
            db.execute("UPDATE tpcc.meta SET runs = runs + 1")
            orders_before = _orders(db)

        def facts() -> RunFacts:
            with conn.connect() as db:
                created = _orders(db) - orders_before
            return RunFacts(opts, info.warehouses, active, rate, created, version, info.load_bytes)

        def many(multi: MultiLoad) -> tuple[TpccRun, str]:
            result = merged_result(multi, facts())
            return replace(result, argv=multi.hosts[0].pgbench.argv), multi.raw()

        def one(host: OneHost) -> tuple[TpccRun, str]:
            # The scripts and the logs are files in ``scratch``, on this machine.
            prefix = scratch / f"txlog_{secrets.token_hex(4)}"
            argv = pgbench.run_argv(host.bin_dir, target, bench_opts, prefix, extra_options(opts))
            started = time.time()
            out = _stream(host, argv, opts, target, on_progress)
            logs = pgbench.transaction_log_files(scratch, prefix.name)
            result = build_result(
                out.done.stdout, out.done.stderr, logs, facts(), started_epoch=started,
                progress=out.progress,
            )  # fmt: skip
            result = replace(result, argv=tuple(map(str, argv)))
            check_duration(
                f"the TPC-C client pgbench on {host.executor.where}",
                opts.duration_s,
                result.transactions,
                result.tps,
                result.latency_avg_ms,
            )
            return result, out.raw()

        job = LoadJob(
            bench_opts, workdir, target, extra_options(opts), figure=("tpmC", host_tpmc),
            on_progress=on_progress, auto_threads=opts.threads is None,
        )  # fmt: skip
        return clients.drive(job, one, many)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def warm(
    conn: Conn,
    opts: RunOptions,
    workdir: Path,
    clients: Clients,
    on_progress: Callable[[ProgressPoint], None] | None = None,
) -> None:
    """A warm-up of ``opts`` from ``clients``: TPC-C's transactions, nothing
    measured; what ``on_progress`` raises stops it (``Clients.warm``)."""
    info, active = prepare(conn, opts, len(clients.names))
    scratch = Path(tempfile.mkdtemp(prefix="pgrig-tpcc-", dir=workdir))
    try:
        paths = sqlfiles.write_scripts(opts.mode, scratch)
        bench_opts = replace(_bench_options(opts, paths, 1.0, active, info), transaction_log=False)
        with conn.connect() as db:
            db.execute("UPDATE tpcc.meta SET runs = runs + 1")  # it ran transactions too
        job = LoadJob(
            bench_opts, workdir, with_isolation(conn, opts.isolation), extra_options(opts),
            on_progress=on_progress, auto_threads=opts.threads is None,
        )  # fmt: skip
        clients.warm(job)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def extra_options(opts: RunOptions) -> tuple[str, ...]:
    """pgbench's options for TPC-C beyond ``pgbench.RunOptions``."""
    return (f"--max-tries={opts.max_tries}", "--failures-detailed")


def _bench_options(
    opts: RunOptions, paths: Sequence[Path], rate: float, active: int, info: checks.Loaded
) -> pgbench.RunOptions:
    """pgbench's options for the TPC-C scripts: the mix's weights, the sampled
    transaction log, and the constants the scripts draw with."""
    return pgbench.RunOptions(
        mode="custom",
        clients=opts.connections,
        threads=opts.pgbench_threads,
        duration_s=opts.duration_s,
        query_mode="prepared",
        scripts=tuple((str(p), WEIGHTS[n]) for p, n in zip(paths, TRANSACTIONS, strict=True)),
        progress_interval=opts.progress_interval,
        statement_latencies=False,
        transaction_log=True,
        sampling_rate=rate,
        rate=opts.rate,
        defines=(
            ("active", str(active)),
            ("k_c_id", str(info.c_id)),
            ("k_ol_i_id", str(info.ol_i_id)),
            ("k_c_last", str(run_constant(info.c_last_load))),
        ),
    )


def _stream(
    host: OneHost,
    argv: list[str],
    opts: RunOptions,
    target: Conn,
    on_progress: Callable[[ProgressPoint], None] | None,
) -> Streamed:
    """pgbench on ``host`` (its executor), its lines and progress points kept as they come
    (each point also to ``on_progress``); a failed run raises ToolError."""
    raw: list[str] = []
    progress: list[ProgressPoint] = []

    watch = ClientWatch(f"the TPC-C client pgbench on {host.executor.where}",
                        opts.progress_interval, opts.duration_s)  # fmt: skip

    def on_line(stream_name: str, line: str) -> None:
        raw.append(line)
        if stream_name == "stderr" and (p := pgbench.parse_progress(line)):
            watch.heard()
            progress.append(p)
            if on_progress:
                on_progress(p)

    with proc.watched_by(watch.check):
        done = host.executor.stream(
            argv,
            timeout=opts.duration_s * 1.25 + 60.0,
            on_line=on_line,
            env=target.env(),
            check=False,
            what="pgbench",
            preexec=host.preexec,
        )
    if not done.ok:
        raise ToolError(
            "pgbench (TPC-C) failed",
            argv=done.argv,
            returncode=done.returncode,
            stderr=done.stderr or done.stdout,
            hint="the run was aborted part-way: see the error above and the server log"
            if done.returncode == 2
            else "check that the server accepts connections with these settings",
        )
    return Streamed(done, tuple(raw), tuple(progress))


def _orders(db: psycopg.Connection) -> int:
    """Orders created so far: the sum of the districts' next order ids."""
    row = db.execute("SELECT coalesce(sum(d_next_o_id), 0) FROM tpcc.district").fetchone()
    return int(row[0]) if row else 0


# --------------------------------------------------------------------------
# Parsing pgbench's report and logs


_SCRIPT = re.compile(r"^SQL script (\d+): (.*)$")
_SCRIPT_LINE = re.compile(r"^- (.*)$")
_COUNT = re.compile(r"^(\d+) transactions \(")
_NUMBER = re.compile(r"^([a-z ]+?)\s*[:=]\s*(-?[\d.]+)")
_TOTAL_FIELDS = {
    "number of serialization failures": "serialization_failures",
    "number of deadlock failures": "deadlock_failures",
    "number of transactions retried": "retried",
    "total number of retries": "retries",
}


def parse_scripts(stdout: str) -> list[dict[str, float]]:
    """The per-script blocks of a multi-script report, in script order: transactions,
    failed, retried, retries, serialization and deadlock failures, latency average."""
    blocks: list[dict[str, float]] = []
    for raw in stdout.splitlines():
        line = raw.strip()
        if _SCRIPT.match(line):
            blocks.append({})
            continue
        m = _SCRIPT_LINE.match(line)
        if not blocks or not m:
            continue
        item = m.group(1)
        if c := _COUNT.match(item):
            blocks[-1]["transactions"] = int(c.group(1))
        elif n := _NUMBER.match(item):
            blocks[-1][n.group(1).strip()] = float(n.group(2))
    return blocks


def parse_totals(stdout: str) -> dict[str, int]:
    """Run-wide retry and failure counts (lines before the first script block)."""
    out = {v: 0 for v in _TOTAL_FIELDS.values()}
    for raw in stdout.splitlines():
        line = raw.strip()
        if _SCRIPT.match(line):
            break
        if (n := _NUMBER.match(line)) and n.group(1).strip() in _TOTAL_FIELDS:
            out[_TOTAL_FIELDS[n.group(1).strip()]] = int(float(n.group(2)))
    return out


def timeline(
    completed: Mapping[int, Mapping[int, int]],
    duration_s: float,
    sampling_rate: float,
) -> tuple[TpmPoint, ...]:
    """tpmC and tpmTotal per interval (about 20 intervals per run, a whole number
    of seconds, at least 1) from each script's completions per second of the run."""
    interval = max(1, round(duration_s / 20))
    bins = max(1, int(duration_s // interval))
    new_order = [0] * bins
    total = [0] * bins
    for script, seconds in completed.items():
        for second, n in seconds.items():
            i = second // interval
            if 0 <= i < bins:
                total[i] += n
                if script == 0:
                    new_order[i] += n
    scale = 60.0 / interval / sampling_rate
    return tuple(
        TpmPoint(t_s=(i + 1) * interval, tpmc=new_order[i] * scale, tpm_total=total[i] * scale)
        for i in range(bins)
    )


def _tpm(tps: float, blocks: Sequence[dict[str, float]]) -> tuple[float, float]:
    """tpmC and tpmTotal of a run: New-Orders' share of all transactions per minute."""
    done = sum(int(b.get("transactions", 0)) for b in blocks) or 1
    tpm_total = tps * 60.0
    return tpm_total * int(blocks[0].get("transactions", 0)) / done, tpm_total


def _blocks(stdout: str, where: str = "") -> list[dict[str, float]]:
    blocks = parse_scripts(stdout)
    if len(blocks) != len(TRANSACTIONS):
        raise ParseError(
            f"pgbench{where} reported {len(blocks)} scripts, expected {len(TRANSACTIONS)}",
            hint="the TPC-C run needs the five scripts in their order",
        )
    return blocks


def host_tpmc(host: HostLoad) -> float:
    """One load host's tpmC, from its own report."""
    return _tpm(host.pgbench.tps, _blocks(host.stdout, f" on {host.host}"))[0]


_POOLED = ("transactions", "number of failed transactions", "number of transactions retried")


def merged_result(multi: MultiLoad, facts: RunFacts) -> TpccRun:
    """A run of several load hosts as one: counts, tps and tpmC summed (tpmC host
    by host, as tps), each type's mean latency weighted by its transactions, its
    percentiles from every host's log pooled, tpmC over time from the pooled
    completions on this machine's clock (each host's clock offset removed)."""
    per_host = [_blocks(h.stdout, f" on {h.host}") for h in multi.hosts]
    blocks: list[dict[str, float]] = []
    for same in zip(*per_host, strict=True):
        block = {k: float(sum(b.get(k, 0) for b in same)) for k in _POOLED}
        timed = [(b["latency average"], b.get("transactions", 0)) for b in same
                 if "latency average" in b]  # fmt: skip
        if sum(n for _, n in timed):
            block["latency average"] = sum(v * n for v, n in timed) / sum(n for _, n in timed)
        blocks.append(block)
    totals = {k: 0 for k in _TOTAL_FIELDS.values()}
    for h in multi.hosts:
        for k, v in parse_totals(h.stdout).items():
            totals[k] += v
    summary = txlog.pool(
        txlog.parse_logs(map(Path, h.log_files), multi.offset_s(h.host), multi.start_at)
        for h in multi.hosts
    )
    result = _result(merged(multi), blocks, totals, summary, facts)
    return replace(result, tpmc=sum(host_tpmc(h) for h in multi.hosts))


def build_result(
    stdout: str,
    stderr: str,
    logs: Sequence[Path],
    facts: RunFacts,
    *,
    started_epoch: float,
    progress: Sequence[ProgressPoint] = (),
) -> TpccRun:
    """One host's run from its output and transaction logs (``started_epoch``:
    the run's start, the logs' time origin)."""
    return _result(
        pgbench.parse_run(stdout, stderr, mode="custom"),
        _blocks(stdout),
        parse_totals(stdout),
        txlog.parse_logs(logs, origin_s=started_epoch),
        facts,
        progress,
    )


def _result(
    base: PgbenchRun,
    blocks: Sequence[dict[str, float]],
    totals: dict[str, int],
    summary: txlog.TxLog,  # completions counted from the run's start
    facts: RunFacts,
    progress: Sequence[ProgressPoint] = (),  # none for a multi-host run: per host only
) -> TpccRun:
    opts, sampling_rate, loaded_bytes = facts.opts, facts.sampling_rate, facts.loaded_bytes
    types = []
    for number, (name, block) in enumerate(zip(TRANSACTIONS, blocks, strict=True)):
        hist = summary.latencies.get(number)
        pct = txlog.summary(hist, sampling_rate) if hist is not None else None
        types.append(
            TxnStats(
                name=name,
                weight=WEIGHTS[name],
                transactions=int(block.get("transactions", 0)),
                failed=int(block.get("number of failed transactions", 0)),
                retried=int(block.get("number of transactions retried", 0)),
                latency_avg_ms=block.get("latency average"),
                p50_ms=pct.p50_ms if pct else None,
                p90_ms=pct.p90_ms if pct else None,
                p95_ms=pct.p95_ms if pct else None,
                p99_ms=pct.p99_ms if pct else None,
                max_ms=pct.max_ms if pct else None,
                samples=pct.samples if pct else 0,
            )
        )
    tpmc, tpm_total = _tpm(base.tps, blocks)
    rollbacks = 0
    if facts.orders_created is not None:
        rollbacks = max(0, types[0].transactions - facts.orders_created)
    return TpccRun(
        mode=opts.mode,
        warehouses=facts.warehouses,
        active=facts.active,
        connections=base.clients,
        threads=base.threads,
        duration_s=base.duration_s or float(opts.duration_s),
        isolation=opts.isolation,
        transactions=base.transactions,
        failed=base.failed,
        retried=totals["retried"],
        retries=totals["retries"],
        serialization_failures=totals["serialization_failures"],
        deadlock_failures=totals["deadlock_failures"],
        tpmc=tpmc,
        tpm_total=tpm_total,
        tps=base.tps,
        rollbacks=rollbacks,
        latency_avg_ms=base.latency_avg_ms,
        types=tuple(types),
        timeline=timeline(summary.completed, base.duration_s, sampling_rate),
        latency_digits=txlog.DIGITS,
        sampling_rate=sampling_rate,
        pgbench_version=facts.pgbench_version,
        loaded_bytes=loaded_bytes,
        active_bytes=None
        if loaded_bytes is None
        else active_share(loaded_bytes, facts.active, facts.warehouses),
        progress=tuple(progress),
    )
