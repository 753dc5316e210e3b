"""pgbench: load the TPC-B tables (``pgbench -i``) and run timed benchmarks (``-T``).

Two halves, each an argv builder, a runner and pure parsers:

* ``init_argv`` / ``run_init`` / ``parse_init``: ``pgbench -i``. Client-side
  generation prints one progress line per 100,000 rows on stderr::

      100000 of 200000 tuples (50%) done (elapsed 0.04 s, remaining 0.04 s)

  server-side generation (``G``) prints none. PostgreSQL 13 and later end with::

      done in 0.23 s (drop tables 0.01 s, create tables 0.00 s,
      client-side generate 0.11 s, vacuum 0.05 s, primary keys 0.06 s).

* ``run_argv`` / ``run_bench`` / ``parse_run``: a timed run. ``-P`` progress
  lines arrive on stderr while the run goes; the report is printed on stdout at
  the end. PostgreSQL 14+ prints ``initial connection time`` and
  ``tps = X (without initial connection time)``; 15 adds failures (a column in
  the ``-r`` block too); 12 and older (the seeds) print two ``tps`` lines,
  "including" and "excluding connections establishing": the excluding one is
  kept, as it measures the same thing as "without initial connection time".

Per-transaction logs (``-l``) give the latency percentiles pgbench's report
lacks; ``run_bench`` parses and then deletes exactly the files that pgbench
wrote for that run.
"""

from __future__ import annotations

import dataclasses
import math
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pgrig import proc
from pgrig.cluster import binaries
from pgrig.errors import ParseError, ToolError, UsageError, WorkdirError
from pgrig.results import LatencySummary, PgbenchInit, PgbenchRun, ProgressPoint, StatementLatency

TOOL = "pgbench"

ROWS_PER_SCALE = 100_000
"""pgbench_accounts rows per unit of scale factor."""

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

# SQL commands per transaction of the builtin scripts, transaction control
# (BEGIN/END) excluded: used when the run has no ``-r`` block to count from.
BUILTIN_STATEMENTS = {
    "<builtin: select only>": 1,
    "<builtin: simple update>": 3,
    "<builtin: TPC-B (sort of)>": 5,
}
_MODE_OF_TYPE = {
    "<builtin: select only>": "select-only",
    "<builtin: TPC-B (sort of)>": "read-write",
}
_BUILTIN_OF_MODE = {"select-only": "select-only", "read-write": "tpcb-like"}

_PARSE_HINT = (
    "this pgbench output is not understood; "
    "please report it together with the raw output kept in the results store"
)


# --------------------------------------------------------------------------
# Connection and binary


class ConnArgs(Protocol):
    """Anything that can say where to connect as pgbench arguments, i.e.
    ``pgrig.conninfo.Conn`` (a libpq string passed as pgbench's dbname)."""

    def args(self) -> list[str]: ...


class ClientConn(ConnArgs, Protocol):
    """A connection pgbench can run against: its arguments and its environment."""

    def env(self) -> dict[str, str]: ...  # the password, kept off the command line


def _binary(bin_dir: Path | str) -> Path:
    return binaries.tool_path(bin_dir, TOOL)


_VERSION = re.compile(r"^pgbench \(PostgreSQL\) (\S.*)$")


def parse_version(text: str) -> str:
    """``pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`` -> ``15.18 (Debian ...)``."""
    for line in text.splitlines():
        if m := _VERSION.match(line.strip()):
            return m.group(1).strip()
    raise ParseError(
        f"{TOOL} --version printed no version: {text.strip()[:200]!r}", hint=_PARSE_HINT
    )


def pgbench_version(bin_dir: Path | str, timeout: float = 30.0) -> str:
    """The version of ``<bin_dir>/pgbench``, e.g. ``15.18 (Debian 15.18-0+deb12u1)``."""
    done = proc.run([_binary(bin_dir), "--version"], timeout=timeout, what=TOOL)
    return parse_version(done.stdout)


def _check_ok(done: proc.Completed, what: str) -> None:
    """Raise ToolError with a hint that fits pgbench's exit code."""
    if done.ok:
        return
    # pgbench exits 1 for bad options and setup failures (no connection), and 2
    # when the run started but clients aborted: the report it printed is then
    # explicitly "incomplete", so it is not used.
    if done.returncode == 2:
        hint = (
            "the run was aborted part-way, usually because the server crashed, "
            "restarted or ran out of resources: check the server log"
        )
    else:
        hint = "check that the server is running and accepts connections with these settings"
    raise ToolError(
        f"{what} failed",
        argv=done.argv,
        returncode=done.returncode,
        stderr=done.stderr or done.stdout,
        hint=hint,
    )


def _collector(raw: list[str], handle: Callable[[str, str], None]) -> Callable[[str, str], None]:
    """An on_line callback that keeps every line in arrival order, then handles it."""

    def on_line(stream_name: str, line: str) -> None:
        raw.append(line)
        handle(stream_name, line)

    return on_line


def _raw_text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------
# pgbench -i


@dataclass(frozen=True)
class InitOptions:
    """How to load the pgbench tables."""

    scale: int
    generate: Literal["client", "server"] = "client"
    partitions: int = 0  # 0 = pgbench_accounts not partitioned
    unlogged: bool = False
    tablespace: str | None = None
    index_tablespace: str | None = None
    fillfactor: int | None = None

    def __post_init__(self) -> None:
        if self.scale < 1:
            raise UsageError(f"pgbench scale must be at least 1, not {self.scale}")
        if self.generate not in ("client", "server"):
            raise UsageError(
                f"pgbench generate must be 'client' or 'server', not {self.generate!r}"
            )
        if self.partitions < 0:
            raise UsageError(f"pgbench partitions must be 0 or more, not {self.partitions}")
        if self.fillfactor is not None and not 10 <= self.fillfactor <= 100:
            raise UsageError(f"pgbench fillfactor must be 10..100, not {self.fillfactor}")

    @property
    def rows(self) -> int:
        return ROWS_PER_SCALE * self.scale


def init_argv(bin_dir: Path | str, conn: ConnArgs, opts: InitOptions) -> list[str]:
    """The ``pgbench -i`` command line for ``opts``."""
    steps = "dtgvp" if opts.generate == "client" else "dtGvp"
    argv = [str(_binary(bin_dir)), "-i", "-s", str(opts.scale), f"--init-steps={steps}"]
    if opts.partitions:
        argv.append(f"--partitions={opts.partitions}")
    if opts.unlogged:
        argv.append("--unlogged-tables")
    if opts.tablespace:
        argv.append(f"--tablespace={opts.tablespace}")
    if opts.index_tablespace:
        argv.append(f"--index-tablespace={opts.index_tablespace}")
    if opts.fillfactor is not None:
        argv += ["-F", str(opts.fillfactor)]
    return argv + conn.args()


_INIT_PROGRESS = re.compile(
    r"^(\d+) of (\d+) tuples \(\d+%\) done \(elapsed ([\d.]+) s, remaining ([\d.]+) s\)"
)
_INIT_DONE = re.compile(r"^done in ([\d.]+) s \((.*)\)\.?$")
_INIT_STEP = re.compile(r"^(.*?) ([\d.]+) s$")


def parse_init_progress(line: str) -> tuple[int, int] | None:
    """``(done_rows, total_rows)`` from a ``pgbench -i`` progress line, else None."""
    m = _INIT_PROGRESS.match(line.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_init(text: str, opts: InitOptions) -> PgbenchInit:
    """Parse ``pgbench -i`` output (stderr; stdout may be mixed in).

    ``rows_per_s`` is rows divided by the generate step's seconds when pgbench
    reports that step (it always does from PostgreSQL 13 on), otherwise by the
    whole elapsed time. pgbench prints hundredths of a second, so a step shown
    as 0.00 s is taken as 0.01 s: tiny scales give a lower bound, not a
    division by zero.
    """
    for raw in text.splitlines():
        m = _INIT_DONE.match(raw.strip())
        if not m:
            continue
        elapsed = float(m.group(1))
        steps: dict[str, float] = {}
        for part in m.group(2).split(","):
            step = _INIT_STEP.match(part.strip())
            if not step:
                raise ParseError(
                    f"{TOOL} -i: step not understood: {part.strip()!r}", hint=_PARSE_HINT
                )
            steps[step.group(1)] = float(step.group(2))
        generate_s = next((s for name, s in steps.items() if name.endswith("generate")), None)
        basis = generate_s if generate_s is not None else elapsed
        return PgbenchInit(
            scale=opts.scale,
            rows=opts.rows,
            elapsed_s=elapsed,
            rows_per_s=opts.rows / max(basis, 0.01),
            steps=steps,
            generate=opts.generate,
            partitions=opts.partitions,
            unlogged=opts.unlogged,
            tablespace=opts.tablespace,
            index_tablespace=opts.index_tablespace,
        )
    raise ParseError(
        f"{TOOL} -i printed no 'done in X s (...)' line", hint="pgrig needs pgbench 13 or later"
    )


def run_init(
    bin_dir: Path | str,
    conn: ClientConn,
    opts: InitOptions,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float | None = None,
) -> tuple[PgbenchInit, str]:
    """Run ``pgbench -i``; return the result and the output, lines in arrival order.

    ``on_progress(done_rows, total_rows)`` follows client-side generation live;
    server-side generation reports nothing until it is over. The default
    timeout allows 3 s per scale unit on top of 10 minutes: generous, since a
    slow disk at scale 10,000 took seed 000 over 1,000 s just to generate.
    """
    argv = init_argv(bin_dir, conn, opts)
    raw: list[str] = []

    def handle(stream_name: str, line: str) -> None:
        if on_progress is not None and (point := parse_init_progress(line)):
            on_progress(*point)

    done = proc.stream(
        argv,
        timeout=timeout if timeout is not None else 600.0 + 3.0 * opts.scale,
        on_line=_collector(raw, handle),
        env=conn.env(),
        check=False,
        what=f"{TOOL} -i",
    )
    _check_ok(done, f"{TOOL} -i")
    return parse_init(done.stderr + done.stdout, opts), _raw_text(raw)


# --------------------------------------------------------------------------
# Timed runs


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
    bin_dir: Path | str, conn: ConnArgs, opts: RunOptions, log_prefix: Path | None
) -> list[str]:
    """The ``pgbench -T`` command line; ``-l`` with ``log_prefix`` when it is given."""
    argv = [str(_binary(bin_dir))]
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
    return argv + conn.args()


_LAG = re.compile(r"^rate limit schedule lag: avg ([\d.]+) \(max ([\d.]+)\) ms", re.M)
_LATE = re.compile(r"^number of transactions above the ([\d.]+) ms latency limit: (\d+)/\d+", re.M)
_PROGRESS = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms(.*)$")
_PROGRESS_STDDEV = re.compile(r"\bstddev ([\d.]+)")
_PROGRESS_FAILED = re.compile(r"\b(\d+) failed\b")
_PROGRESS_LAG = re.compile(r"\blag ([\d.]+) ms")


def parse_progress(line: str) -> ProgressPoint | None:
    """A ``-P`` line as a ProgressPoint, or None for any other line.

    PostgreSQL 15: ``progress: 1.0 s, 2151.9 tps, lat 0.922 ms stddev 0.227, 0 failed``
    followed by ``, lag 0.095 ms, 0 skipped`` under ``-R``; older versions lack
    the failures.
    """
    m = _PROGRESS.match(line.strip())
    if not m:
        return None
    rest = m.group(4)
    stddev = _PROGRESS_STDDEV.search(rest)
    failed = _PROGRESS_FAILED.search(rest)
    lag = _PROGRESS_LAG.search(rest)
    return ProgressPoint(
        t_s=float(m.group(1)),
        tps=float(m.group(2)),
        latency_ms=float(m.group(3)),
        stddev_ms=float(stddev.group(1)) if stddev else None,
        failed=int(failed.group(1)) if failed else None,
        lag_ms=float(lag.group(1)) if lag else None,
    )


_FIELD = re.compile(r"^([a-z][a-z ]*?)\s*[:=]\s*(.*)$")
_LEADING_NUMBER = re.compile(r"^([\d.]+)")
_TPS = re.compile(r"^tps = ([\d.]+) \((.*)\)$")
_STMT_HEADER = re.compile(r"^(?:- )?statement latencies in milliseconds")
_STMT = re.compile(r"^\s*([\d.]+)((?:\s+\d+)*)\s+(\S.*?)\s*$")
_SCRIPT = re.compile(r"^SQL script \d+: (.*)$")
_SCRIPT_TXNS = re.compile(r"^- (\d+) transactions \(")
_TXN_CONTROL = re.compile(
    r"^(BEGIN|END|COMMIT|ROLLBACK|ABORT|START\s+TRANSACTION)\b", re.IGNORECASE
)


def is_sql_statement(command: str) -> bool:
    """True for an SQL command that counts as a query: not a ``\\`` meta-command,
    not transaction control. The builtin TPC-B script counts 5, as the seeds'
    qps = tps x 5."""
    text = command.strip()
    return bool(text) and not text.startswith("\\") and not _TXN_CONTROL.match(text)


@dataclass
class _Script:
    name: str
    transactions: int | None = None
    statements: list[StatementLatency] = dataclasses.field(default_factory=list)

    @property
    def sql_count(self) -> int:
        return sum(1 for s in self.statements if is_sql_statement(s.command))


def _statements_per_txn(scripts: list[_Script], transaction_type: str) -> int:
    """SQL statements per transaction, from the ``-r`` blocks when there are any.

    With several scripts the per-script counts are averaged, weighted by the
    transactions each script ran, and rounded: ``PgbenchRun`` keeps an int.
    """
    counted = [s for s in scripts if s.statements]
    if not counted:
        return BUILTIN_STATEMENTS.get(transaction_type, 0)
    if len(counted) == 1:
        return counted[0].sql_count
    weights = [s.transactions or 0 for s in counted]
    if sum(weights) == 0:
        weights = [1] * len(counted)
    mean = sum(w * s.sql_count for w, s in zip(weights, counted, strict=True)) / sum(weights)
    return round(mean)


def _number(value: str, key: str) -> float:
    m = _LEADING_NUMBER.match(value)
    if not m:
        raise ParseError(f"{TOOL}: {key!r} has no number: {value!r}", hint=_PARSE_HINT)
    return float(m.group(1))


def parse_run(stdout: str, stderr: str = "", *, mode: str | None = None) -> PgbenchRun:
    """Parse a timed run: the report on ``stdout``, ``-P`` lines from ``stderr``.

    ``mode`` is pgrig's name for the workload; when None it is derived from the
    transaction type (builtin select only / TPC-B, anything else is custom).
    Progress lines are also looked for in ``stdout``, for text pasted together.
    """
    fields: dict[str, str] = {}
    tps_without: float | None = None
    tps_including: float | None = None
    scripts: list[_Script] = []
    in_statements = False

    for raw in stdout.splitlines():
        line = raw.strip()
        if in_statements:
            if m := _STMT.match(line):
                numbers = m.group(2).split()
                scripts[-1].statements.append(
                    StatementLatency(
                        latency_ms=float(m.group(1)),
                        command=m.group(3),
                        failures=int(numbers[0]) if numbers else None,
                    )
                )
                continue
            in_statements = False
        if _STMT_HEADER.match(line):
            in_statements = True
            if not scripts:  # one script: its block follows the run's totals
                scripts.append(_Script(fields.get("transaction type", "")))
            continue
        if m := _SCRIPT.match(line):
            scripts.append(_Script(m.group(1)))
        elif (m := _SCRIPT_TXNS.match(line)) and scripts:
            scripts[-1].transactions = int(m.group(1))
        elif m := _TPS.match(line):
            if m.group(2).startswith("including"):
                tps_including = float(m.group(1))
            else:  # "without initial connection time" / "excluding connections establishing"
                tps_without = float(m.group(1))
        elif m := _FIELD.match(line):
            fields.setdefault(m.group(1), m.group(2).strip())

    def need(key: str) -> str:
        if key not in fields:
            raise ParseError(f"{TOOL} report has no {key!r} line", hint=_PARSE_HINT)
        return fields[key]

    transaction_type = need("transaction type")
    processed = need("number of transactions actually processed")
    tps = tps_without if tps_without is not None else tps_including
    if tps is None:
        raise ParseError(f"{TOOL} report has no 'tps = ...' line", hint=_PARSE_HINT)
    if len(scripts) == 1 and scripts[0].transactions is None:
        scripts[0].transactions = int(_number(processed, "transactions"))

    def optional(key: str) -> float | None:
        return _number(fields[key], key) if key in fields else None

    progress = [p for text in (stderr, stdout) for p in map(parse_progress, text.splitlines()) if p]
    lag = _LAG.search(stdout)
    late = _LATE.search(stdout)
    skipped = fields.get("number of transactions skipped")
    return PgbenchRun(
        mode=mode or _MODE_OF_TYPE.get(transaction_type, "custom"),
        transaction_type=transaction_type,
        scale=int(_number(need("scaling factor"), "scaling factor")),
        query_mode=need("query mode"),
        clients=int(_number(need("number of clients"), "clients")),
        threads=int(_number(need("number of threads"), "threads")),
        duration_s=optional("duration") or 0.0,
        transactions=int(_number(processed, "transactions")),
        failed=int(optional("number of failed transactions") or 0),
        tps=tps,
        latency_avg_ms=_number(need("latency average"), "latency average"),
        latency_stddev_ms=optional("latency stddev"),
        initial_connection_ms=optional("initial connection time"),
        statements_per_txn=_statements_per_txn(scripts, transaction_type),
        statements=tuple(s for script in scripts for s in script.statements),
        progress=tuple(progress),
        lag_avg_ms=float(lag.group(1)) if lag else None,
        lag_max_ms=float(lag.group(2)) if lag else None,
        skipped=int(skipped.split()[0]) if skipped else None,
        late=int(late.group(2)) if late else None,
        latency_limit_ms=float(late.group(1)) if late else None,
    )


def count_script_statements(text: str) -> int:
    """SQL statements in a pgbench script, for runs without ``-r``.

    A heuristic, not pgbench's lexer: meta-command lines and ``--`` comments
    are dropped, the rest is split on ``;`` and transaction control is not
    counted. Good for ordinary scripts; a ``;`` inside a string literal
    would count twice.
    """
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("\\"):
            continue
        kept.append(stripped.split("--", 1)[0])
    return sum(1 for part in " ".join(kept).split(";") if is_sql_statement(part))


# --------------------------------------------------------------------------
# Per-transaction logs


def transaction_log_files(workdir: Path, prefix_name: str) -> list[Path]:
    """The files pgbench writes for ``--log-prefix=<workdir>/<prefix_name>``:
    ``<prefix_name>.<pid>`` for thread 0 and ``<prefix_name>.<pid>.<n>`` for the others."""
    pattern = re.compile(re.escape(prefix_name) + r"\.\d+(?:\.\d+)?")
    return sorted(p for p in workdir.iterdir() if pattern.fullmatch(p.name) and p.is_file())


def _percentile(ordered: Sequence[int], pct: float) -> int:
    """Nearest-rank percentile of an ascending sequence: a value that was measured."""
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def parse_transaction_logs(paths: Iterable[Path], sampling_rate: float) -> LatencySummary | None:
    """Latency percentiles from ``-l`` log files; None when no transaction was logged.

    Each line is ``client_id transaction_no time script_no time_epoch time_us
    [schedule_lag]`` with ``time`` in microseconds (from the scheduled start
    under ``-R``). Transactions logged as ``skipped`` or failed (a word in place
    of the time) are not latency samples and are left out.
    """
    samples: list[int] = []
    for path in paths:
        with path.open(encoding="ascii", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                cols = line.split()
                if not cols:
                    continue
                if len(cols) < 6:
                    raise ParseError(
                        f"{path}:{lineno}: not a pgbench transaction log line: {line.strip()!r}",
                        hint="aggregated logs (--aggregate-interval) are not supported",
                    )
                if cols[2].isdigit():
                    samples.append(int(cols[2]))
    if not samples:
        return None
    samples.sort()
    return LatencySummary(
        samples=len(samples),
        sampling_rate=sampling_rate,
        p50_ms=_percentile(samples, 50) / 1000.0,
        p95_ms=_percentile(samples, 95) / 1000.0,
        p99_ms=_percentile(samples, 99) / 1000.0,
        max_ms=samples[-1] / 1000.0,
    )


# --------------------------------------------------------------------------
# Running


def run_bench(
    bin_dir: Path | str,
    conn: ClientConn,
    opts: RunOptions,
    workdir: Path,
    on_progress: Callable[[ProgressPoint], None] | None = None,
    timeout: float | None = None,
) -> tuple[PgbenchRun, str]:
    """Run pgbench for ``opts.duration_s``; return the result and the output
    (stdout and stderr lines in arrival order).

    ``on_progress`` gets each ``-P`` point as it arrives. With
    ``opts.transaction_log`` the logs go to ``workdir`` under a name unique to
    this call, are summarised into ``result.latency`` and deleted afterwards,
    also when the run fails. A failed or aborted run raises ToolError with the
    end of pgbench's stderr; its partial report is not used.
    """
    prefix: Path | None = None
    if opts.transaction_log:
        if not workdir.is_dir():
            raise WorkdirError(
                f"work directory {workdir} does not exist",
                hint="create it, or choose another with --workdir",
            )
        prefix = workdir.resolve() / f"pgrig_txlog_{secrets.token_hex(4)}"
    argv = run_argv(bin_dir, conn, opts, prefix)
    raw: list[str] = []

    def handle(stream_name: str, line: str) -> None:
        if on_progress is not None and stream_name == "stderr" and (p := parse_progress(line)):
            on_progress(p)

    # Slack past -T: connecting many clients, and finishing transactions in flight.
    limit = timeout if timeout is not None else opts.duration_s * 1.25 + 60.0
    try:
        done = proc.stream(
            argv,
            timeout=limit,
            on_line=_collector(raw, handle),
            cwd=workdir if workdir.is_dir() else None,
            env=conn.env(),
            check=False,
            what=TOOL,
        )
        _check_ok(done, TOOL)
        result = parse_run(done.stdout, done.stderr, mode=opts.mode)
        if result.statements_per_txn == 0 and opts.mode == "custom":
            result = dataclasses.replace(result, statements_per_txn=_count_scripts(opts))
        if prefix is not None:
            files = transaction_log_files(prefix.parent, prefix.name)
            latency = parse_transaction_logs(files, log_sampling_rate(opts))
            result = dataclasses.replace(result, latency=latency)
    finally:
        if prefix is not None:
            for path in transaction_log_files(prefix.parent, prefix.name):
                path.unlink(missing_ok=True)
    return result, _raw_text(raw)


def _count_scripts(opts: RunOptions) -> int:
    """Weighted SQL statements per transaction of the custom scripts, read from disk."""
    total_weight = sum(w for _, w in opts.scripts) or 1
    mean = sum(
        w * count_script_statements(Path(p).read_text(errors="replace")) for p, w in opts.scripts
    )
    return round(mean / total_weight)
