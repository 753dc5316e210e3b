"""The results store: every run recorded the moment it finishes.

SQLite by default (one file, nothing to install); or a PostgreSQL database
given by URI (``--store postgresql://...``) with the same schema, so a team can
pool the results of many machines in one place. Each ``record`` call is its
own transaction, so a study interrupted half way - Ctrl-C, ``kill -9``, power
loss - keeps everything that finished. Results are stored as JSON of the
dataclasses in ``pgrig.results`` together with the raw tool output, so a later
pgrig can re-parse what an older one measured.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import cast

from pgrig.conninfo import Conn
from pgrig.errors import StoreError, StudyExists, UnknownStudy
from pgrig.results import (
    SCHEMA_VERSION,
    Environment,
    JsonValue,
    RunRecord,
    Status,
    Study,
    StudyStatus,
    from_dict,
    to_dict,
)
from pgrig.sql import load as load_sql

# "{serial}" in the schema: each backend's auto-increment primary key.
_SCHEMA = load_sql("store_schema")
SQLITE_SCHEMA = _SCHEMA.replace("{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT")
POSTGRES_SCHEMA = _SCHEMA.replace("{serial}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
_INSERT_RUN = load_sql("store_insert_run")
_INSERT_SAMPLE = "INSERT INTO samples (run_id, n, value) VALUES (?, ?, ?)"

# What goes into a statement's placeholders and comes back in a row's columns.
SqlValue = None | int | float | str | bytes
Row = dict[str, SqlValue]


def _text(row: Row, column: str) -> str:
    """A TEXT column that is never NULL (the schema says which)."""
    return cast(str, row[column])


def _maybe_text(row: Row, column: str) -> str | None:
    return cast("str | None", row[column])


def location(results: Path, store: str | None) -> Path | str:
    """Where the results are: ``--store`` (a file or a PostgreSQL URI), else
    ``RESULTS/results.sqlite``."""
    if store is None:
        return results / "results.sqlite"
    return store if is_uri(store) else Path(store)


def _masked(location: str | Path) -> str:
    """A store's location for messages: a URI without its password."""
    return Conn.from_user(str(location)).describe() if is_uri(location) else str(location)


def is_uri(location: str | Path) -> bool:
    """A PostgreSQL connection string rather than a file path."""
    text = str(location)
    return text.startswith(("postgresql://", "postgres://")) or (
        "=" in text and not Path(text).exists()
    )


class _Backend:
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

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Iterator[Row]:
        """The rows one at a time: a study's runs hold every sample it took."""
        raise NotImplementedError

    def insert_id(self, sql: str, params: tuple[SqlValue, ...]) -> int:
        raise NotImplementedError

    def begin(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def rollback(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    duplicate: tuple[type[BaseException], ...] = ()
    errors: tuple[type[BaseException], ...] = ()


class _Sqlite(_Backend):
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
        self.conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.executescript(SQLITE_SCHEMA)
        columns = {r["name"] for r in self.conn.execute("PRAGMA table_info(studies)")}
        if "target_environments" not in columns:  # files from before campaigns
            self.conn.execute("ALTER TABLE studies ADD COLUMN target_environments TEXT")

    def execute(self, sql: str, params: tuple[SqlValue, ...] = ()) -> list[Row]:
        with closing(self.conn.execute(sql, params)) as cur:
            return [dict(row) for row in cur.fetchall()]

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Iterator[Row]:
        with closing(self.conn.execute(sql, params)) as cur:
            for row in cur:
                yield dict(row)

    def insert_id(self, sql: str, params: tuple[SqlValue, ...]) -> int:
        with closing(self.conn.execute(sql, params)) as cur:
            return int(cur.lastrowid or 0)

    def insert_samples(self, rows: Iterable[tuple[int, int, str]]) -> None:
        # executemany takes the rows from the iterator as it goes
        with closing(self.conn.executemany(_INSERT_SAMPLE, rows)):
            pass

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()


# A store's statements write one record or read one study's: seconds at most.
PG_STATEMENT_TIMEOUT_S = 300.0
PG_LOCK_TIMEOUT_S = 60.0


class _Postgres(_Backend):
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

    def each(self, sql: str, params: tuple[SqlValue, ...] = ()) -> Iterator[Row]:
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
    def begin(self) -> None:
        self.conn.execute("BEGIN")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Store:
    """A results store. Open with ``Store.open(path_or_uri)``; safe to reopen."""

    def __init__(self, backend: _Backend, path: Path | str) -> None:
        self._db = backend
        self.path = path
        self.version = SCHEMA_VERSION  # as written in the store's meta table

    @classmethod
    def open(cls, location: Path | str) -> Store:
        uri = is_uri(location)
        try:
            backend: _Backend = _Postgres(str(location)) if uri else _Sqlite(Path(location))
        except Exception as exc:  # sqlite3.Error, psycopg.Error, OSError
            damaged = isinstance(exc, sqlite3.DatabaseError) and (
                "not a database" in str(exc) or "malformed" in str(exc)
            )
            raise StoreError(
                f"cannot open results store {_masked(location)}: "
                f"{str(exc).strip().replace(str(location), _masked(location))}",
                hint=f"the file is damaged: `sqlite3 {location} .recover | sqlite3 "
                "recovered.sqlite` may save its studies; move it aside "
                f"(mv {location} {location}.bad) to start a new one"
                if damaged
                else "pass --store with a writable file path or a reachable PostgreSQL URI",
            ) from exc
        store = cls(backend, location if uri else Path(location))
        if uri:
            store.path = backend.label
        rows = backend.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        if not rows:
            with store._tx() as db:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            store.version = SCHEMA_VERSION
        elif int(_text(rows[0], "value")) > SCHEMA_VERSION:
            backend.close()
            raise StoreError(
                f"{_masked(location)} was written by a newer pgrig"
                f" (schema {_text(rows[0], 'value')}, "
                f"this one reads up to {SCHEMA_VERSION})",
                hint="upgrade pgrig, or pass --store with another file",
            )
        else:
            store.version = int(_text(rows[0], "value"))
        return store

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[_Backend]:
        try:
            self._db.begin()
        except self._db.errors as exc:
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc
        try:
            yield self._db
        except self._db.errors as exc:  # a lock or statement timeout, a lost server
            self._db.rollback()
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc
        except BaseException:
            self._db.rollback()
            raise
        try:
            self._db.commit()
        except self._db.errors as exc:
            self._db.rollback()
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc

    # -- studies ---------------------------------------------------------

    def begin_study(self, study: Study) -> None:
        with self._tx() as conn:
            try:
                self._insert_study(conn, study)
            except self._db.duplicate as exc:
                raise StudyExists(f"{self.path} already holds a study {study.id!r}") from exc

    @staticmethod
    def _insert_study(conn: _Backend, study: Study) -> None:
        conn.execute(
            "INSERT INTO studies (id, name, target, status, started_at, finished_at, params,"
            " pgrig_version, environment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                study.id,
                study.name,
                study.target,
                study.status,
                study.started_at,
                study.finished_at,
                _dumps(study.params),
                study.pgrig_version,
                _dumps(to_dict(study.environment)) if study.environment else None,
            ),
        )

    def set_environment(self, study_id: str, env: Environment) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE studies SET environment = ? WHERE id = ?", (_dumps(to_dict(env)), study_id)
            )

    def set_target_environment(self, study_id: str, target: str, env: Environment) -> None:
        """A campaign's per-target environment (its server's version and settings)."""
        with self._tx() as conn:
            rows = conn.execute("SELECT target_environments FROM studies WHERE id = ?", (study_id,))
            envs = (
                json.loads(_text(rows[0], "target_environments"))
                if rows and rows[0]["target_environments"]
                else {}
            )
            envs[target] = to_dict(env)
            conn.execute(
                "UPDATE studies SET target_environments = ? WHERE id = ?",
                (_dumps(envs), study_id),
            )

    def set_status(self, study_id: str, status: str) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE studies SET status = ? WHERE id = ?", (status, study_id))

    def finish_study(self, study_id: str, status: str, finished_at: str) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE studies SET status = ?, finished_at = ? WHERE id = ?",
                (status, finished_at, study_id),
            )

    def study(self, study_id: str) -> Study:
        rows = self._db.execute("SELECT * FROM studies WHERE id = ?", (study_id,))
        row = rows[0] if rows else None
        if row is None:
            known = ", ".join(s.id for s in self.studies()[-5:]) or "none"
            raise UnknownStudy(
                f"no study {study_id!r} in {self.path}",
                hint=f"recent studies: {known} (see `pgrig list`)",
            )
        return self._study(row)

    def studies(self) -> list[Study]:
        rows = self._db.execute("SELECT * FROM studies ORDER BY started_at, id")
        return [self._study(row) for row in rows]

    def latest_study(self) -> Study | None:
        studies = self.studies()
        return studies[-1] if studies else None

    @staticmethod
    def _study(row: Row) -> Study:
        env = json.loads(_text(row, "environment")) if row["environment"] else None
        envs = row["target_environments"]
        target_envs = json.loads(_text(row, "target_environments")) if envs else {}
        return Study(
            id=_text(row, "id"),
            name=_text(row, "name"),
            target=_text(row, "target"),
            status=cast(StudyStatus, row["status"]),
            started_at=_text(row, "started_at"),
            finished_at=_maybe_text(row, "finished_at"),
            params=json.loads(_text(row, "params")),
            pgrig_version=_text(row, "pgrig_version"),
            environment=from_dict(Environment, env) if env else None,
            target_environments={k: from_dict(Environment, v) for k, v in target_envs.items()},
        )

    # -- runs ------------------------------------------------------------

    def record(
        self, rec: RunRecord, samples: Iterable[Mapping[str, object]] | None = None
    ) -> RunRecord:
        """Write one finished run. A key already recorded in this study is an error:
        a run is never recorded twice.

        A result's per-second ``samples`` go to rows of their own, the result
        keeping an empty list: from the result itself, or - when the result's
        list is empty - from ``samples``, taken one at a time inside the run's
        transaction (a monitor's spool read back: never all in memory; a kill
        keeps all of the run or none of it)."""
        result = rec.result
        listed = result.get("samples") if isinstance(result, dict) else None
        if isinstance(listed, list) and listed and result is not None:
            samples = cast(list[dict[str, JsonValue]], listed)
            result = {**result, "samples": []}
        upgraded = self.version
        with self._tx() as conn:
            try:
                new_id = conn.insert_id(
                    _INSERT_RUN,
                    (
                        rec.study,
                        rec.key,
                        rec.kind,
                        rec.target,
                        _dumps(rec.params),
                        rec.status,
                        rec.reason,
                        _dumps(result) if result is not None else None,
                        rec.raw,
                        _dumps(rec.tool_versions),
                        rec.started_at,
                        rec.finished_at,
                    ),
                )
            except self._db.duplicate as exc:
                raise StoreError(
                    f"run {rec.key!r} is already recorded in study {rec.study}"
                ) from exc
            if samples is not None and self._insert_samples(conn, new_id, samples):
                upgraded = SCHEMA_VERSION
        self.version = max(self.version, upgraded)
        return replace(rec, id=new_id)

    def _insert_samples(
        self, conn: _Backend, run_id: int, samples: Iterable[Mapping[str, object]]
    ) -> bool:
        """The rows of a run's samples; True when there were any."""
        rows = ((run_id, n, _dumps(sample)) for n, sample in enumerate(samples))
        first = next(rows, None)
        if first is None:
            return False
        if self.version < SCHEMA_VERSION:  # a store of schema 1: its pgrig would miss them
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
        conn.insert_samples(itertools.chain((first,), rows))
        return True

    def import_study(self, other: Store, study_id: str, *, as_id: str | None = None) -> str:
        """Copy one study and its runs from another results file (another machine's)."""
        study = other.study(study_id)
        new_id = as_id or study.id
        if any(s.id == new_id for s in self.studies()):
            raise StoreError(
                f"{self.path} already holds a study {new_id!r}",
                hint="import it under another name with --as NEW_ID",
            )
        self.begin_study(replace(study, id=new_id, status=study.status))
        for env_target, env in study.target_environments.items():
            self.set_target_environment(new_id, env_target, env)
        if study.finished_at:
            self.finish_study(new_id, study.status, study.finished_at)
        for rec in other.runs(study_id, without_samples=other.kinds(study_id)):
            samples = other.samples(rec.id) if rec.id is not None else None
            self.record(replace(rec, study=new_id, id=None), samples)
        return new_id

    def kinds(self, study_id: str) -> list[str]:
        """The kinds of record the study holds."""
        rows = self._db.execute("SELECT DISTINCT kind FROM runs WHERE study_id = ?", (study_id,))
        return sorted(_text(row, "kind") for row in rows)

    def runs(
        self,
        study_id: str,
        *,
        without_samples: Collection[str] = (),
        without_progress: Collection[str] = (),
    ) -> list[RunRecord]:
        """The study's records in the order they ran. The results of the kinds
        in ``without_samples`` come without their per-second ``samples`` (the
        monitor's: most of a long run's bytes), an empty list in their place:
        read them one run at a time with ``samples(run_id)``; those of the kinds
        in ``without_progress`` without their ``progress`` (pgbench's ``-P``
        points, about 0.4 kB a second of run): ``progress(run_id)``. Rows are
        decoded one by one, so what is left out is never all in memory at once."""
        lists: dict[str, tuple[str, ...]] = {}  # kind -> the lists its result comes without
        for key, kinds_of in (("samples", without_samples), ("progress", without_progress)):
            for kind in kinds_of:
                lists[kind] = (*lists.get(kind, ()), key)
        kinds = tuple(without_samples)
        result, params = "result", []
        if lists:
            whens = []
            for keys in sorted(set(lists.values())):
                same = [k for k, v in lists.items() if v == keys]
                lean = "result"
                for key in keys:
                    lean = self._db.lean(lean, key)
                whens.append(f"WHEN kind IN ({', '.join('?' * len(same))}) THEN {lean}")
                params += same
            result = f"CASE {' '.join(whens)} ELSE result END"
        rows = self._db.each(
            f"SELECT {_RUN_COLUMNS}, {result} AS result FROM runs WHERE study_id = ? ORDER BY id",
            (*params, study_id),
        )
        out = [_record(row) for row in rows]
        with_rows = {
            row["run_id"]
            for row in self._db.execute(
                "SELECT DISTINCT s.run_id FROM samples s JOIN runs r ON r.id = s.run_id"
                " WHERE r.study_id = ?",
                (study_id,),
            )
        }
        for rec in out:  # the samples kept in rows of their own, back in their place
            whole = rec.kind not in kinds and isinstance(rec.result, dict)
            if whole and rec.id is not None and rec.id in with_rows:
                rec.result["samples"] = list(self.samples(rec.id))  # type: ignore[index]
        return out

    def keys(self, study_id: str) -> set[str]:
        """The keys of the study's records, and nothing else of them."""
        rows = self._db.each("SELECT key FROM runs WHERE study_id = ?", (study_id,))
        return {str(row["key"]) for row in rows}

    def samples(self, run_id: int) -> Iterator[dict[str, JsonValue]]:
        """One run's per-second samples as stored (dicts), one at a time; none
        when it has none: from their rows, or from the result that holds them
        (stores of schema 1)."""
        found = False
        for row in self._db.each(_SAMPLES_SQL, (run_id,)):
            found = True
            yield json.loads(_text(row, "value"))
        if found:
            return
        yield from self._elements(run_id, "samples")

    def progress(self, run_id: int) -> Iterator[dict[str, JsonValue]]:
        """One run's ``progress`` points as stored (dicts), one at a time, taken
        from its result by the database; none when it has none."""
        return self._elements(run_id, "progress")

    def _elements(self, run_id: int, key: str) -> Iterator[dict[str, JsonValue]]:
        for row in self._db.each(self._db.elements_sql(key), (run_id,)):
            yield json.loads(_text(row, "value"))


_SAMPLES_SQL = "SELECT value FROM samples WHERE run_id = ? ORDER BY n"
_RUN_COLUMNS = (
    "id, study_id, key, kind, target, params, status, reason, raw, tool_versions,"
    " started_at, finished_at"
)


def _record(row: Row) -> RunRecord:
    result = json.loads(_text(row, "result")) if row["result"] else None
    return RunRecord(
        id=cast("int | None", row["id"]),
        study=_text(row, "study_id"),
        key=_text(row, "key"),
        kind=_text(row, "kind"),
        target=_text(row, "target"),
        params=json.loads(_text(row, "params")),
        status=cast(Status, row["status"]),
        reason=_maybe_text(row, "reason"),
        result=result,
        raw=_text(row, "raw"),
        tool_versions=json.loads(_text(row, "tool_versions")),
        started_at=_text(row, "started_at"),
        finished_at=_text(row, "finished_at"),
    )
