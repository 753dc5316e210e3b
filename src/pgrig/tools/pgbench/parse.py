"""Parsers of a timed run's output: the report pgbench prints on stdout at the end,
and the ``-P`` progress lines it prints on stderr while the run goes.

PostgreSQL 14+ prints ``initial connection time`` and ``tps = X (without initial
connection time)``; 15 adds failures (a column in the ``-r`` block too); 12 and
older (the seeds) print two ``tps`` lines, "including" and "excluding
connections establishing": the excluding one is kept, as it measures the same
thing as "without initial connection time".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pgrig.errors import ParseError
from pgrig.results import PgbenchRun, ProgressPoint, StatementLatency
from pgrig.tools.pgbench.program import PARSE_HINT, TOOL

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
        raise ParseError(f"{TOOL}: {key!r} has no number: {value!r}", hint=PARSE_HINT)
    return float(m.group(1))


def _scan_report(stdout: str) -> tuple[dict[str, str], float | None, float | None, list[_Script]]:
    """The report's ``key: value`` lines (the first of each key), its tps without
    and including connection time, and its scripts with their statement latencies."""
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
    return fields, tps_without, tps_including, scripts


def parse_run(stdout: str, stderr: str = "", *, mode: str | None = None) -> PgbenchRun:
    """Parse a timed run: the report on ``stdout``, ``-P`` lines from ``stderr``.

    ``mode`` is pgrig's name for the workload; when None it is derived from the
    transaction type (builtin select only / TPC-B, anything else is custom).
    Progress lines are also looked for in ``stdout``, for text pasted together.
    """
    fields, tps_without, tps_including, scripts = _scan_report(stdout)

    def need(key: str) -> str:
        if key not in fields:
            raise ParseError(f"{TOOL} report has no {key!r} line", hint=PARSE_HINT)
        return fields[key]

    transaction_type = need("transaction type")
    processed = need("number of transactions actually processed")
    tps = tps_without if tps_without is not None else tps_including
    if tps is None:
        raise ParseError(f"{TOOL} report has no 'tps = ...' line", hint=PARSE_HINT)
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
        tps_including_printed=tps_including,
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
