"""The user's own workload under the durability check (seed 001 crashed its
login workload and looked for lost rows and duplicate keys).

While pgrig's ledger clients prove that no acknowledged commit was lost, a
pgbench running the workload's own scripts writes beside them - relaunched
after every crash, as an application reconnects - and after every recovery the
checks the workload declares run: each is a query that returns the rows that
break it (duplicate keys, rows one transaction wrote only half of, ...); none
returned means it holds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import psycopg

from pgrig.conninfo import Conn
from pgrig.durability.model import Check
from pgrig.hosts.executor import Started
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.schema import Table
from pgrig.workloads.custom.spec import ScriptSpec

RELAUNCH_S = 0.5  # between a crashed pgbench and the next attempt
DAY_S = 86400  # pgbench's -T: it runs until stopped
CHECK_TIMEOUT_MS = 60_000
EXAMPLES = 3


@dataclass(frozen=True)
class UserCheck:
    """A query returning the rows that break an invariant of the workload."""

    name: str
    sql: str


def parse_checks(t: Table, key: str, default: object) -> tuple[UserCheck, ...]:
    out = []
    for item in t.get(key, list, []):
        if not isinstance(item, dict):
            raise t.error(key, f"expected {{ name, sql }}, got {item!r}")
        c = Table(item, (*t.path, key), t.ctx)
        name, sql = c.get("name", str), c.get("sql", str)
        if not name or not sql:
            raise t.error(
                key,
                "each check needs a name and the sql that returns the rows breaking it",
                hint='{ name = "one session per user", sql = "SELECT userid FROM user_session '
                'GROUP BY userid HAVING count(*) > 1" }',
            )
        c.finish(("name", "sql"))
        out.append(UserCheck(name, sql))
    return tuple(out)


def run_checks(conn: Conn, checks: tuple[UserCheck, ...]) -> tuple[Check, ...]:
    """Each declared check: ok when its query returns no row."""
    out = []
    with conn.connect() as db:
        db.execute(f"SET statement_timeout = {CHECK_TIMEOUT_MS}")
        for check in checks:
            try:
                rows = db.execute(check.sql).fetchall()
            except psycopg.Error as exc:
                out.append(Check(check.name, None, f"the query failed: {str(exc).strip()}"))
                continue
            if rows:
                shown = "; ".join(", ".join(map(str, r)) for r in rows[:EXAMPLES])
                out.append(Check(check.name, False, f"{len(rows):,} rows break it, e.g. {shown}"))
            else:
                out.append(Check(check.name, True, "no row breaks it"))
    return tuple(out)


@dataclass
class UserLoad:
    """pgbench running the workload's scripts until stopped, relaunched after
    each crash (its connections die with the server)."""

    bins: PgBinaries
    conn: Conn
    scripts: tuple[ScriptSpec, ...]
    defines: dict[str, str]
    clients: int
    launches: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _started: Started | None = None
    _thread: threading.Thread | None = None

    def argv(self) -> list[str]:
        args = [str(self.bins.path("pgbench")), "-n", "-c", str(self.clients), "-T", str(DAY_S)]
        for script in self.scripts:
            args += ["-f", f"{script.path}@{script.weight}"]
        for name, value in self.defines.items():
            args += ["-D", f"{name}={value}"]
        return args + self.conn.args()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="pgrig-user-load", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            # This machine's executor: its environment plus the connection's password.
            self._started = started = HERE.start(self.argv(), env=self.conn.env())
            self.launches += 1
            if self._stop.is_set():  # stop() came between the check and the start
                started.stop()
            # Until the server crashes, or stop(); -T ends it after a day at the latest.
            started.wait(DAY_S + 60, check=False)
            self._stop.wait(RELAUNCH_S)

    def stop(self) -> None:
        self._stop.set()
        if self._started is not None and self._started.poll() is None:
            self._started.stop()  # the one escalation (TERM, then KILL)
        if self._thread is not None:
            self._thread.join(timeout=30)
