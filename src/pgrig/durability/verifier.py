"""What is verified after every recovery and at the end of the run.

* every acknowledged commit is present (its history row, by client-chosen id);
* no id is present twice - read from the heap with index scans disabled, since
  a unique index that lost entries (seed 001's duplicate keys) would hide it;
* every history row is as its client wrote it, and no row appeared that no
  client sent;
* the invariants hold: each account, teller and branch balance equals the sum
  of its history rows, so all four totals agree (no half transaction);
* ``pg_amcheck`` finds heap and B-tree indexes consistent (``--heapallindexed``;
  with data checksums, a torn or corrupted page fails its checksum);
* the server log holds no errors other than the ones a crash causes;
* after power losses, ``pg_checksums --check`` on the stopped cluster (when it
  has data checksums): every page of every relation, not only the check's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from pgrig.cluster.server import Cluster
from pgrig.conninfo import Conn
from pgrig.durability.clients import PREFIX, TABLES, delta_of
from pgrig.durability.model import Check
from pgrig.errors import ToolError
from pgrig.hosts.executor import C_LOCALE, Launch
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.sql import load as load_sql

ACKED = "acknowledged commits present"
DUPLICATES = "no id present twice"
ROWS = "rows as the clients wrote them"
INVARIANTS = "invariants (balances = sum of history)"
AMCHECK = "pg_amcheck (heap + B-tree)"
LOG = "server log"
READABLE = "tables readable"
CHECKSUMS = "pg_checksums"
EXAMPLES = 5

# The four sums that agree after any number of whole transactions.
TOTALS_SQL = load_sql("durability_totals").format(prefix=PREFIX)
# The rows of one table out of balance with the history (format: prefix, table, key).
UNBALANCED_SQL = load_sql("durability_unbalanced")

# Severe log lines that a crash explains: the other backends being told to quit,
# clients reconnecting while the server starts or recovers.
EXPECTED_AROUND_CRASH = tuple(
    re.compile(p)
    for p in (
        r"terminating connection because of crash of another server process",
        r"terminating connection due to unexpected postmaster exit",
        r"terminating connection due to immediate shutdown command",
        r"terminating connection because of unexpected SIGQUIT signal",
        r"the database system is (starting up|in recovery mode|shutting down"
        r"|not yet accepting connections|not accepting connections)",
    )
)
_LOG_LINE = re.compile(r"^(?P<prefix>.*?)\b(?P<sev>LOG|WARNING|ERROR|FATAL|PANIC):\s+(?P<msg>.*)$")
_CHILD_DIED = re.compile(r"\(PID (?P<pid>\d+)\) (was terminated by signal|exited with exit code)")


@dataclass(frozen=True)
class DataState:
    """What one verification found in the tables."""

    checks: tuple[Check, ...]
    missing: frozenset[int]  # acknowledged ids not present
    present: frozenset[int]  # ids present (heap scan)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S.%f")[:-3]


def _examples(items: Iterable[str]) -> str:
    items = list(items)
    text = "; ".join(items[:EXAMPLES])
    return text + (f"; and {len(items) - EXAMPLES:,} more" if len(items) > EXAMPLES else "")


def verify_data(
    conn: Conn,
    acked: Mapping[int, float],
    in_doubt: set[int],
    rejected: set[int],
) -> DataState:
    rows, totals, unbalanced = _snapshot(conn)
    counts = Counter(r[0] for r in rows)
    present = frozenset(counts)
    missing = frozenset(set(acked) - present)
    checks = []

    if missing:
        first = sorted(missing, key=lambda i: acked[i])
        detail = f"{len(missing):,} of {len(acked):,} acknowledged commits are missing: " + (
            _examples(f"id {i} (acknowledged at {_when(acked[i])} UTC)" for i in first)
        )
        checks.append(Check(ACKED, False, detail))
    else:
        checks.append(Check(ACKED, True, f"all {len(acked):,} acknowledged commits present"))

    dups = sorted(i for i, n in counts.items() if n > 1)
    if dups:
        detail = f"{len(dups):,} ids present more than once: " + _examples(
            f"id {i} present {counts[i]} times" for i in dups
        )
        checks.append(Check(DUPLICATES, False, detail))
    else:
        checks.append(Check(DUPLICATES, True, f"{len(rows):,} history rows, all ids distinct"))

    problems = [
        f"history row id {i}: delta {d}, but its client wrote {delta_of(i)}"
        for i, d in sorted(rows)
        if d != delta_of(i)
    ]
    problems += [
        f"history row id {i} belongs to a transaction that was rolled back with an error"
        for i in sorted(present & rejected)
    ]
    problems += [
        f"history row id {i} was never sent by a client"
        for i in sorted(present - set(acked) - in_doubt - rejected)
    ]
    if problems:
        checks.append(Check(ROWS, False, f"{len(problems):,} bad rows: " + _examples(problems)))
    else:
        committed = len(present & in_doubt)
        checks.append(
            Check(
                ROWS,
                True,
                f"every row as written; {committed:,} of {len(in_doubt):,} in-doubt commits "
                "are present",
            )
        )

    checks.append(_invariants(totals, unbalanced))
    return DataState(tuple(checks), missing, present)


def _snapshot(
    conn: Conn,
) -> tuple[list[tuple[int, int]], tuple[int, ...], list[tuple[str, int, int, int]]]:
    """The history rows (id, delta), the four totals and the unbalanced rows
    (what, key, balance, history sum), read in one snapshot from the heap."""
    with conn.connect(autocommit=False) as db:
        # One snapshot for everything; the heap, not an index, decides what is there.
        db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for knob in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
            db.execute(f"SET LOCAL {knob} = off")
        rows = db.execute(f"SELECT id, delta FROM {PREFIX}history").fetchall()
        totals = db.execute(TOTALS_SQL).fetchone()
        unbalanced = []
        for table, key in (("accounts", "aid"), ("tellers", "tid"), ("branches", "bid")):
            query = UNBALANCED_SQL.format(prefix=PREFIX, table=table, key=key)
            found = db.execute(query).fetchall()
            unbalanced += [(table[:-1], k, b, s) for k, b, s in found]
        db.rollback()
    assert totals is not None
    return rows, tuple(totals), unbalanced


def _invariants(totals: tuple[int, ...], unbalanced: list[tuple[str, int, int, int]]) -> Check:
    """TPC-B's sums agree, and each row's balance is its history's sum."""
    accounts, tellers, branches, history = (int(v) for v in totals)
    sums = (
        f"sum(accounts) = {accounts:,}, sum(tellers) = {tellers:,}, "
        f"sum(branches) = {branches:,}, sum(history.delta) = {history:,}"
    )
    if unbalanced or len({accounts, tellers, branches, history}) != 1:
        detail = f"broken: {sums}"
        if unbalanced:
            detail += "; " + _examples(
                f"{what} {k}: balance {b:,} but its history rows sum to {s:,}"
                for what, k, b, s in unbalanced
            )
        return Check(INVARIANTS, False, detail)
    return Check(INVARIANTS, True, f"hold: {sums}")


def unreadable(acked: Mapping[int, float], exc: psycopg.Error) -> DataState:
    """What a verification found when the check's tables could not be read: gone
    (every acknowledged commit with them) or too damaged to scan."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.UndefinedTable):
        detail = f"{len(acked):,} acknowledged commits gone with their table: {first}"
        return DataState(
            (Check(ACKED, False, detail), Check(READABLE, False, first)),
            frozenset(acked),
            frozenset(),
        )
    return DataState(
        (Check(ACKED, None, f"not run: {first}"), Check(READABLE, False, first)),
        frozenset(),
        frozenset(),
    )


def checksums(cluster: Cluster, *, enabled: bool) -> Check:
    """``pg_checksums --check`` needs the cluster shut down cleanly: stopped, checked,
    started again."""
    if not enabled:
        return Check(CHECKSUMS, None, "not run: the cluster has no data checksums")
    if not cluster.bins.has("pg_checksums"):
        return Check(CHECKSUMS, None, f"not run: no pg_checksums in {cluster.bins.bin_dir}")
    cluster.stop()
    try:
        done = cluster.ex.run(  # on the server's host, as its OS user
            [str(cluster.bins.path("pg_checksums")), "--check", "-D", str(cluster.datadir)],
            timeout=600,
            check=False,
            launch=Launch(cluster.pm.user),
            what="pg_checksums",
        )
    except ToolError as exc:
        return Check(CHECKSUMS, None, f"not run: {exc}")
    finally:
        cluster.start()
    output = (done.stdout + done.stderr).strip()
    bad = re.search(r"Bad checksums:\s+(\d+)", output)
    scanned = re.search(r"Blocks scanned:\s+(\d+)", output)
    if done.returncode == 0 and bad is not None and bad.group(1) == "0":
        blocks = f"{int(scanned.group(1)):,} blocks" if scanned else "every block"
        return Check(CHECKSUMS, True, f"{blocks} of the cluster match their checksums")
    if bad is not None and bad.group(1) != "0":
        lines = [line for line in output.splitlines() if "checksum verification failed" in line]
        return Check(
            CHECKSUMS, False, f"{bad.group(1)} pages fail their checksum: " + _examples(lines)
        )
    return Check(CHECKSUMS, None, f"could not run (exit code {done.returncode}): {output[-400:]}")


AMCHECK_FROM = 140000  # amcheck 1.3 (verify_heapam), which pg_amcheck needs


def amcheck_unavailable(bins: PgBinaries, conn: Conn) -> str | None:
    """Why pg_amcheck cannot check this server, per version; None when it can."""
    if not bins.has("pg_amcheck"):
        return f"no pg_amcheck in {bins.bin_dir} or any newer PostgreSQL installed (14+)"
    try:
        with conn.connect() as db:
            row = db.execute(
                "SELECT current_setting('server_version_num')::int, "
                "(SELECT default_version FROM pg_available_extensions WHERE name = 'amcheck')"
            ).fetchone()
    except psycopg.Error as exc:
        return f"cannot ask the server: {exc}"
    assert row is not None
    version_num, extension = int(row[0]), row[1]
    if version_num < AMCHECK_FROM:
        return (
            f"PostgreSQL {bins.version} cannot be checked: pg_amcheck needs the amcheck "
            "extension's heap checks (1.3, PostgreSQL 14+)"
        )
    if extension is None:
        return (
            f"PostgreSQL {bins.version} in {bins.bin_dir} ships no amcheck extension "
            "(a server-only build without contrib)"
        )
    return None


def amcheck(bins: PgBinaries, conn: Conn, *, install_missing: bool) -> Check:
    """``pg_amcheck`` on the check's tables and their indexes - or why not."""
    unavailable = amcheck_unavailable(bins, conn)
    if unavailable is not None:
        return Check(AMCHECK, None, f"not run: {unavailable}")
    argv: list[str | Path] = [bins.path("pg_amcheck"), "--heapallindexed", "--no-strict-names"]
    if install_missing:
        argv.append("--install-missing")
    for table in TABLES:
        argv += ["--table", table]
    argv.append(conn.conninfo())
    try:
        done = HERE.run(
            [str(a) for a in argv], timeout=600, env=C_LOCALE, check=False, what="pg_amcheck"
        )
    except ToolError as exc:
        return Check(AMCHECK, None, f"not run: {exc}")
    output = (done.stdout + done.stderr).strip()
    if done.returncode == 0:
        return Check(AMCHECK, True, f"no corruption in {len(TABLES)} tables and their indexes")
    if done.returncode == 2:
        lines = [line for line in output.splitlines() if line.strip()]
        return Check(AMCHECK, False, "corruption found: " + _examples(lines))
    return Check(AMCHECK, None, f"could not run (exit code {done.returncode}): {output[-400:]}")


def read_log(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_offset(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def unexpected_log_lines(text: str, killed_pids: set[int]) -> list[str]:
    """Severe lines a crash does not explain. Children dying is logged at LOG
    level, so those lines count too unless the child is one pgrig killed."""
    found = []
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if m is None:
            continue
        sev, msg = m.group("sev"), m.group("msg")
        if sev == "LOG":
            died = _CHILD_DIED.search(msg)
            if died and not _expected_death(msg, int(died.group("pid")), killed_pids):
                found.append(line.strip())
            continue
        if any(p.search(msg) for p in EXPECTED_AROUND_CRASH):
            continue
        found.append(line.strip())
    return found


def _expected_death(msg: str, pid: int, killed_pids: set[int]) -> bool:
    if pid in killed_pids and "signal 9" in msg:
        return True
    # The launcher exits with 1 whenever the server shuts down: normal.
    return "logical replication launcher" in msg and msg.endswith("exit code 1")


def check_log(path: Path | None, offset: int, killed_pids: set[int]) -> Check:
    if path is None:
        return Check(LOG, None, "not checked: the server is not pgrig's, its log is not known")
    bad = unexpected_log_lines(read_log(path, offset), killed_pids)
    if bad:
        return Check(LOG, False, f"{len(bad):,} unexpected lines in {path}: " + _examples(bad))
    return Check(LOG, True, "only the messages a crash causes")


def server_settings(db: psycopg.Connection, names: Iterable[str]) -> dict[str, str]:
    # pg_settings, not current_setting(name, missing_ok): that form is 9.6+, and
    # a name the major lacks is simply absent here.
    names = list(names)
    rows = db.execute(
        "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)", (names,)
    ).fetchall()
    found = {str(name): str(value) for name, value in rows}
    return {name: found[name] for name in names if name in found}
