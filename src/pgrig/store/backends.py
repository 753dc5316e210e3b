"""The two databases a results store lives in: SQLite (one file) and PostgreSQL.

``pgrig.store.Store`` speaks to either through ``Backend``: the few things they
do differently (placeholders, JSON functions, bulk inserts, transactions).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Generator, Iterable
from contextlib import closing
from pathlib import Path

from pgrig.conninfo import Conn
from pgrig.errors import StoreError, StoreLocked
from pgrig.sql import load as load_sql

# "{serial}" in the schema: each backend's auto-increment primary key.
_SCHEMA = load_sql("store_schema")
SQLITE_SCHEMA = _SCHEMA.replace("{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT")
POSTGRES_SCHEMA = _SCHEMA.replace("{serial}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
_INSERT_SAMPLE = "INSERT INTO samples (run_id, n, value) VALUES (?, ?, ?)"

# How long a store another process holds locked is waited for (said as it
# starts, after a glance): a backup or a `BEGIN EXCLUSIVE` in sqlite3 lasts seconds.
LOCK_WAIT_S = 30.0
LOCK_GLANCE_S = 1.0

# What goes into a statement's placeholders and comes back in a row's columns.
SqlValue = None | int | float | str | bytes
Row = dict[str, SqlValue]


class Backend:
    """The few things SQLite and PostgreSQL do differently."""

    label: str

    def lean(self, result: str, key: str) -> str:
        """SQL of the result (JSON text) with its list ``key`` emptied: the JSON
        is taken apart by the database, not in pgrig's memory."""
        raise NotImplementedError

    def elements_sql(self, key: str) -> str:
        """SQL of one run's (by id) elements of its result's list ``key``, in
        order, each as JSON text in column ``value``."""
        raise NotImplementedError

    def insert_samples(self, rows: Iterable[tuple[int, int, str]]) -> None:
        """(run id, n, JSON) rows, taken one at a time from ``rows``."""
        raise NotImplementedError

    def execute(self, sql: str, params: tuple[SqlValue, ...] = ()) -> list[Row]:
        raise NotImplementedError

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Generator[Row]:
        """The rows one at a time: a study's runs hold every sample it took."""
        raise NotImplementedError

    def insert_id(self, sql: str, params: tuple[SqlValue, ...]) -> int:
        raise NotImplementedError

    # A transaction is opened, committed and rolled back by these commands on
    # both databases (SQLite's opens with a write lock: its writers take turns).
    begin_sql = "BEGIN"

    def command(self, sql: str) -> None:
        """Run one statement that returns nothing."""
        raise NotImplementedError

    def begin(self) -> None:
        self.command(self.begin_sql)

    def commit(self) -> None:
        self.command("COMMIT")

    def rollback(self) -> None:
        try:
            self.command("ROLLBACK")
        except self.errors as exc:
            # SQLite rolls back by itself on a full disk (SQLITE_FULL) and some I/O
            # errors: nothing is left to undo, and the error that did it is the news
            if "no transaction is active" not in str(exc):
                raise

    def close(self) -> None:
        raise NotImplementedError

    duplicate: tuple[type[BaseException], ...] = ()
    errors: tuple[type[BaseException], ...] = ()


def damaged(location: Path | str, what: str) -> StoreError:
    """A store that cannot be read as pgrig wrote it: said with its path, and
    what may save its studies. Nothing is written to it."""
    return StoreError(
        f"results store {location} is damaged: {what}; it was left as it is",
        hint=f"`sqlite3 {location} .recover | sqlite3 recovered.sqlite` may save its studies;"
        f" move it aside (mv {location} {location}.bad) to start a new one",
    )


class Sqlite(Backend):
    duplicate = (sqlite3.IntegrityError,)
    errors = (sqlite3.Error,)

    def lean(self, result: str, key: str) -> str:
        return (
            f"CASE WHEN json_type({result}, '$.{key}') = 'array'"
            f" THEN json_replace({result}, '$.{key}', json('[]')) ELSE {result} END"
        )

    def elements_sql(self, key: str) -> str:
        return (
            f"SELECT s.value AS value FROM runs, json_each(runs.result, '$.{key}') AS s"
            " WHERE runs.id = ? ORDER BY s.key"
        )

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.label = str(path)
        # Targets measured at once record from their own threads (one at a time:
        # pgrig.recorder holds a lock around every write).
        self.conn = sqlite3.connect(
            path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False
        )
        self.conn.row_factory = sqlite3.Row
        self._patiently(lambda: self.conn.executescript(SQLITE_SCHEMA))
        columns = {r["name"] for r in self.conn.execute("PRAGMA table_info(studies)")}
        if "target_environments" not in columns:  # files from before campaigns
            self.conn.execute("ALTER TABLE studies ADD COLUMN target_environments TEXT")

    def execute(self, sql: str, params: tuple[SqlValue, ...] = ()) -> list[Row]:
        try:
            with closing(self.conn.execute(sql, params)) as cur:
                return [dict(row) for row in cur.fetchall()]
        except sqlite3.DatabaseError as exc:
            raise self._named(exc) from exc

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Generator[Row]:
        try:
            with closing(self.conn.execute(sql, params)) as cur:
                for row in cur:
                    yield dict(row)
        except sqlite3.DatabaseError as exc:
            raise self._named(exc) from exc

    def _named(self, exc: sqlite3.DatabaseError) -> Exception:
        """A damaged file or record said with the store's path and, for a result
        that is no JSON (the database takes results apart), which runs hold one;
        any other error as it was (a lock, a duplicate key: the caller's)."""
        text = str(exc)
        if "malformed JSON" in text:
            rows = self.conn.execute(
                "SELECT study_id, key FROM runs WHERE result IS NOT NULL AND NOT json_valid(result)"
                " ORDER BY id LIMIT 3"
            ).fetchall()
            which = ", ".join(f"{r['study_id']}/{r['key']}" for r in rows) or "a run"
            return damaged(self.label, f"the result of {which} is not valid JSON")
        if "locked" in text:
            return StoreLocked(
                f"results store {self.label} stayed locked by another process for"
                f" {LOCK_WAIT_S:.0f} s",
                hint=f"`fuser -v {self.label}` names the process that holds it; once it lets"
                " go, run the same command again",
            )
        if "malformed" in text or "not a database" in text:
            return damaged(self.label, text)
        return exc

    def insert_id(self, sql: str, params: tuple[SqlValue, ...]) -> int:
        with closing(self.conn.execute(sql, params)) as cur:
            return int(cur.lastrowid or 0)

    def insert_samples(self, rows: Iterable[tuple[int, int, str]]) -> None:
        # executemany takes the rows from the iterator as it goes
        with closing(self.conn.executemany(_INSERT_SAMPLE, rows)):
            pass

    begin_sql = "BEGIN IMMEDIATE"

    def begin(self) -> None:
        self._patiently(lambda: self.conn.execute(self.begin_sql))

    def _patiently(self, act: Callable[[], object]) -> None:
        """Do ``act``; when another process holds the file locked (a `BEGIN
        EXCLUSIVE`, a backup), say so and wait for it, up to LOCK_WAIT_S, then
        give up with who to look for. It waited 30 s in silence, then read
        "database is locked"."""
        self.conn.execute(f"PRAGMA busy_timeout = {int(LOCK_GLANCE_S * 1000)}")
        try:
            act()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")
        sys.stderr.write(
            f"note: results store {self.label} is locked by another process; waiting up to"
            f" {LOCK_WAIT_S:.0f} s for it\n"
        )
        try:
            act()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            raise StoreLocked(
                f"results store {self.label} stayed locked by another process for"
                f" {LOCK_WAIT_S:.0f} s; nothing of the study was lost",
                hint=f"`fuser -v {self.label}` names the process that holds it; once it lets"
                " go, run the same command again (a study resumes where it stopped)",
            ) from exc

    def command(self, sql: str) -> None:
        self.conn.execute(sql)

    def close(self) -> None:
        self.conn.close()


# A store's statements write one record or read one study's: seconds at most.
PG_STATEMENT_TIMEOUT_S = 300.0
PG_LOCK_TIMEOUT_S = 60.0


class Postgres(Backend):
    def lean(self, result: str, key: str) -> str:
        return (
            f"CASE WHEN jsonb_typeof(({result})::jsonb -> '{key}') = 'array'"
            f" THEN jsonb_set(({result})::jsonb, '{{{key}}}', '[]')::text ELSE {result} END"
        )

    def elements_sql(self, key: str) -> str:
        # json, not jsonb: each number as it was written (jsonb prints 1e+300 as 1000...0)
        return (
            "SELECT s.value::text AS value FROM runs,"
            f" json_array_elements(runs.result::json -> '{key}') WITH ORDINALITY AS s(value, n)"
            " WHERE runs.id = ? ORDER BY s.n"
        )

    def __init__(self, uri: str) -> None:
        import psycopg
        from psycopg.rows import dict_row

        self.duplicate = (psycopg.errors.UniqueViolation,)
        self.errors = (psycopg.Error,)
        self.label = Conn.from_user(uri).describe()
        self.conn = psycopg.connect(
            Conn.from_user(uri).conninfo(), autocommit=True, row_factory=dict_row
        )
        # A store server that hangs, or a session holding a lock, fails the
        # write instead of hanging the study (the run is recorded once, in one call).
        self.conn.execute(f"SET statement_timeout = {int(PG_STATEMENT_TIMEOUT_S * 1000)}")
        self.conn.execute(f"SET lock_timeout = {int(PG_LOCK_TIMEOUT_S * 1000)}")
        # One schema for every machine: creating it twice at once is harmless.
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext('pgrig store schema'))")
            for statement in POSTGRES_SCHEMA.split(";"):
                if statement.strip():
                    self.conn.execute(statement)

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s")

    def execute(self, sql: str, params: tuple[SqlValue, ...] = ()) -> list[Row]:
        cur = self.conn.execute(self._sql(sql), params)
        return list(cur.fetchall()) if cur.description else []

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Generator[Row]:
        # single-row mode: libpq does not hold the whole answer either
        with self.conn.cursor() as cur:
            yield from cur.stream(self._sql(sql), params)

    def insert_id(self, sql: str, params: tuple[SqlValue, ...]) -> int:
        row = self.conn.execute(self._sql(sql) + " RETURNING id", params).fetchone()
        return int(row["id"]) if row else 0

    def insert_samples(self, rows: Iterable[tuple[int, int, str]]) -> None:
        # COPY streams the rows to the server as they come
        with (
            self.conn.cursor() as cur,
            cur.copy("COPY samples (run_id, n, value) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    # autocommit connection, explicit transaction commands: one record, one transaction
    def command(self, sql: str) -> None:
        self.conn.execute(sql)

    def close(self) -> None:
        self.conn.close()
