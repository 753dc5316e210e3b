"""Timed runs (``pgbench -T``): the options, the command line, and running it.

``run_bench`` parses the report (``pgrig.tools.pgbench.parse``) and the
per-transaction logs (``pgrig.tools.pgbench.txlog``), then deletes exactly the
log files that pgbench wrote for that run.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pgrig import proc
from pgrig.errors import UsageError, WorkdirError
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import HERE
from pgrig.monitor.client import ClientWatch, check_duration
from pgrig.results import PgbenchRun, ProgressPoint
from pgrig.tools.pgbench.parse import count_script_statements, parse_progress, parse_run
from pgrig.tools.pgbench.program import (
    TOOL,
    ClientConn,
    ConnArgs,
    check_ok,
)
from pgrig.tools.pgbench.txlog import log_names, parse_transaction_logs

AUTO_LOG_TARGET = 50_000
"""With ``sampling_rate="auto"``, log about this many transactions per run:
enough for a stable p99 (500 samples above it), and few enough that writing the
log costs pgbench nothing measurable: at 200,000 logged transactions per 15 s
run, select-only on 2 cores lost about 5% tps (bench/harness_overhead.py)."""

DEFAULT_TPS_GUESS = 100_000.0
"""tps assumed for ``sampling_rate="auto"`` when neither ``expected_tps`` nor a
``rate`` is given: high on purpose, so an unknown machine logs too little
rather than filling the disk (seed 000 reached 887k tps on 52 cores)."""

MODES = ("select-only", "read-write", "custom")
QUERY_MODES = ("simple", "extended", "prepared")

_BUILTIN_OF_MODE = {"select-only": "select-only", "read-write": "tpcb-like"}


@dataclass(frozen=True)
class RunOptions:
    """One timed pgbench run (``-T``).

    ``sampling_rate`` applies to the transaction log (``transaction_log=True``):
    a fraction in (0, 1], or ``"auto"`` to log about ``AUTO_LOG_TARGET``
    transactions, estimating the run's transactions from ``expected_tps``, else
    from ``rate``, else from ``DEFAULT_TPS_GUESS`` (see ``log_sampling_rate``).
    """

    mode: Literal["select-only", "read-write", "custom"] = "select-only"
    clients: int = 1
    threads: int = 1
    duration_s: int = 60
    query_mode: Literal["simple", "extended", "prepared"] = "prepared"
    scripts: tuple[tuple[str, int], ...] = ()  # (path, weight), custom mode only
    progress_interval: int = 1
    statement_latencies: bool = True  # -r
    transaction_log: bool = False  # -l
    sampling_rate: float | Literal["auto"] = 1.0
    expected_tps: float | None = None
    defines: tuple[tuple[str, str], ...] = ()  # -D name=value
    rate: float | None = None  # -R, transactions per second in total
    latency_limit_ms: float | None = None  # -L
    connect_per_transaction: bool = False  # -C
    no_vacuum: bool = True  # -n: the seeds never vacuum before a run

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"pgbench mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.query_mode not in QUERY_MODES:
            raise UsageError(
                f"pgbench query mode must be one of {', '.join(QUERY_MODES)}, "
                f"not {self.query_mode!r}"
            )
        for name in ("clients", "threads", "duration_s", "progress_interval"):
            if getattr(self, name) < 1:
                raise UsageError(f"pgbench {name} must be at least 1, not {getattr(self, name)}")
        if self.mode == "custom" and not self.scripts:
            raise UsageError(
                "pgbench custom mode needs at least one script",
                hint="give scripts as (path, weight) pairs",
            )
        if self.mode != "custom" and self.scripts:
            raise UsageError(f"pgbench scripts are only used in custom mode, not {self.mode!r}")
        for path, weight in self.scripts:
            if weight < 0:
                raise UsageError(f"pgbench script weight must be 0 or more: {path}@{weight}")
        if self.sampling_rate != "auto" and not (
            isinstance(self.sampling_rate, int | float) and 0 < self.sampling_rate <= 1
        ):
            raise UsageError(
                f"pgbench sampling rate must be in (0, 1] or 'auto', not {self.sampling_rate!r}"
            )
        for name in ("rate", "latency_limit_ms", "expected_tps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"pgbench {name} must be positive, not {value}")
        for name, _ in self.defines:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise UsageError(f"pgbench variable name not valid: {name!r}")


def log_sampling_rate(opts: RunOptions) -> float:
    """The ``--sampling-rate`` to use: ``opts.sampling_rate``, or the ``"auto"`` choice.

    Auto: ``AUTO_LOG_TARGET / (estimated tps x duration)``, capped at 1 and
    rounded to 3 significant digits, never below 1e-6 (pgbench rejects 0).
    """
    if opts.sampling_rate != "auto":
        return float(opts.sampling_rate)
    tps = opts.expected_tps or opts.rate or DEFAULT_TPS_GUESS
    wanted = AUTO_LOG_TARGET / (tps * opts.duration_s)
    return max(1e-6, min(1.0, float(f"{wanted:.3g}")))


def run_argv(
    bin_dir: Path | str,
    conn: ConnArgs,
    opts: RunOptions,
    log_prefix: Path | None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The ``pgbench -T`` command line; ``-l`` with ``log_prefix`` when it is given;
    ``extra`` options before the connection (pgbench reads options up to it);
    pgbench in ``bin_dir`` as it was found (not looked for again: ``program.binary``)."""
    argv = [str(Path(bin_dir) / TOOL)]
    if opts.no_vacuum:
        argv.append("-n")
    argv += ["-M", opts.query_mode, "-c", str(opts.clients), "-j", str(opts.threads)]
    argv += ["-T", str(opts.duration_s), "-P", str(opts.progress_interval)]
    if opts.statement_latencies:
        argv.append("-r")
    if opts.mode == "custom":
        for path, weight in opts.scripts:
            argv += ["-f", f"{path}@{weight}"]
    else:
        argv += ["-b", _BUILTIN_OF_MODE[opts.mode]]
    for name, value in opts.defines:
        argv += ["-D", f"{name}={value}"]
    if opts.rate is not None:
        argv += ["-R", f"{opts.rate:g}"]
    if opts.latency_limit_ms is not None:
        argv += ["-L", f"{opts.latency_limit_ms:g}"]
    if opts.connect_per_transaction:
        argv.append("-C")
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
        rate = log_sampling_rate(opts)
        if rate < 1.0:
            argv.append(f"--sampling-rate={rate:g}")
    return [*argv, *extra, *conn.args()]


def run_bench(
    bin_dir: Path | str,
    conn: ClientConn,
    opts: RunOptions,
    workdir: Path,
    on_progress: Callable[[ProgressPoint], None] | None = None,
    timeout: float | None = None,
    preexec: Callable[[], None] | None = None,
    *,
    client: Executor = HERE,
    extra: Sequence[str] = (),
) -> tuple[PgbenchRun, str]:
    """Run pgbench for ``opts.duration_s`` on the ``client`` host (its executor:
    this machine's or another's, the same steps); return the result and the
    output (stdout and stderr lines in arrival order).

    ``on_progress`` gets each ``-P`` point as it arrives. With
    ``opts.transaction_log`` the logs go to ``workdir`` (on the client's host)
    under a name unique to this call, are read into ``result.latency`` and
    deleted afterwards, also when the run fails. ``preexec`` runs in pgbench's
    process before exec (a storage-lab target's clients' cgroup: ``cpus``; this
    machine only). ``extra``: pgbench options beyond ``opts`` (TPC-C's
    ``--max-tries``). A failed or aborted run raises ToolError with the end of
    pgbench's stderr; its partial report is not used.
    """
    prefix: Path | None = None
    if opts.transaction_log:
        if not client.exists(str(workdir)):
            raise WorkdirError(
                f"work directory {workdir} does not exist on {client.where}",
                hint="create it, or choose another with --workdir",
            )
        prefix = workdir.absolute() / f"pgrig_txlog_{secrets.token_hex(4)}"
    argv = run_argv(bin_dir, conn, opts, prefix, extra)
    raw: list[str] = []  # every line, ended, in arrival order: the output kept

    watch = ClientWatch(
        f"the client {TOOL} on {client.where}", opts.progress_interval, opts.duration_s
    )

    def on_line(stream_name: str, line: str) -> None:
        raw.append(line + "\n")
        if stream_name == "stderr" and (p := parse_progress(line)):
            watch.heard()
            if on_progress is not None:
                on_progress(p)

    # Slack past -T: connecting many clients, and finishing transactions in flight.
    limit = timeout if timeout is not None else opts.duration_s * 1.25 + 60.0
    logs: list[str] = []
    try:
        with proc.watched_by(watch.check):
            done = client.stream(
                argv,
                timeout=limit,
                on_line=on_line,
                env=conn.env(),
                check=False,
                what=TOOL,
                preexec=preexec,
            )
        check_ok(done, TOOL)
        result = dataclasses.replace(
            parse_result(done.stdout, done.stderr, opts), argv=tuple(map(str, argv))
        )
        check_duration(
            watch.what, opts.duration_s, result.transactions, result.tps, result.latency_avg_ms
        )
        if prefix is not None:
            logs = _logs(client, prefix)
            with tempfile.TemporaryDirectory(prefix="pgrig-txlog-") as here:
                files = [client.fetch(path, Path(here)) for path in logs]
                latency = parse_transaction_logs(files, log_sampling_rate(opts))
            result = dataclasses.replace(result, latency=latency)
    finally:
        if prefix is not None and (logs := logs or _logs(client, prefix)):
            client.run(["rm", "-f", "--", *logs], timeout=60, what="rm")
    return result, "".join(raw)


def _logs(client: Executor, prefix: Path) -> list[str]:
    """The per-transaction logs pgbench wrote for ``prefix`` on the client's host."""
    return [
        f"{prefix.parent}/{name}"
        for name in log_names(client.listdir(str(prefix.parent)), prefix.name)
    ]


def parse_result(stdout: str, stderr: str, opts: RunOptions) -> PgbenchRun:
    """pgbench's report of a run of ``opts``; a custom run without ``-r`` gets its
    statements per transaction from its scripts (as the controller holds them)."""
    result = parse_run(stdout, stderr, mode=opts.mode)
    if result.statements_per_txn == 0 and opts.mode == "custom":
        result = dataclasses.replace(result, statements_per_txn=_count_scripts(opts))
    return result


def _count_scripts(opts: RunOptions) -> int:
    """Weighted SQL statements per transaction of the custom scripts, read from disk."""
    total_weight = sum(w for _, w in opts.scripts) or 1
    mean = sum(
        w * count_script_statements(Path(p).read_text(errors="replace")) for p, w in opts.scripts
    )
    return round(mean / total_weight)
