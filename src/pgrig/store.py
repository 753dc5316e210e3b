"""The results store: every run recorded the moment it finishes.

SQLite by default (one file, nothing to install). Each ``record`` call is its
own transaction, so a study interrupted half way - Ctrl-C, ``kill -9``, power
loss - keeps everything that finished. Results are stored as JSON of the
dataclasses in ``pgrig.results`` together with the raw tool output, so a later
pgrig can re-parse what an older one measured.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgrig.errors import StoreError
from pgrig.results import SCHEMA_VERSION, Environment, RunRecord, Study, from_dict, to_dict

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS studies (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    target        TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    params        TEXT NOT NULL,
    pgrig_version TEXT NOT NULL,
    environment   TEXT,
    target_environments TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    study_id      TEXT NOT NULL REFERENCES studies(id),
    key           TEXT NOT NULL,
    kind          TEXT NOT NULL,
    target        TEXT NOT NULL,
    params        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    reason        TEXT,
    result        TEXT,
    raw           TEXT NOT NULL,
    tool_versions TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    finished_at   TEXT NOT NULL,
    UNIQUE (study_id, key)
);
"""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Store:
    """A SQLite results file. Open with ``Store.open(path)``; safe to reopen."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path) -> Store:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.executescript(_SCHEMA)
            columns = {r["name"] for r in conn.execute("PRAGMA table_info(studies)")}
            if "target_environments" not in columns:  # files from before campaigns
                conn.execute("ALTER TABLE studies ADD COLUMN target_environments TEXT")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif int(row["value"]) > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} was written by a newer pgrig (schema {row['value']}, "
                    f"this one reads up to {SCHEMA_VERSION})",
                    hint="upgrade pgrig, or pass --store with another file",
                )
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open results store {path}: {exc}",
                hint="pass --store with a writable file path",
            ) from exc
        return cls(conn, path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.execute("ROLLBACK")
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc

    # -- studies ---------------------------------------------------------

    def begin_study(self, study: Study) -> None:
        with self._tx() as conn:
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
            row = conn.execute(
                "SELECT target_environments FROM studies WHERE id = ?", (study_id,)
            ).fetchone()
            envs = json.loads(row["target_environments"]) if row and row[0] else {}
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
        with closing(self._conn.execute("SELECT * FROM studies WHERE id = ?", (study_id,))) as cur:
            row = cur.fetchone()
        if row is None:
            known = ", ".join(s.id for s in self.studies()[-5:]) or "none"
            raise StoreError(
                f"no study {study_id!r} in {self.path}",
                hint=f"recent studies: {known} (see `pgrig list`)",
            )
        return self._study(row)

    def studies(self) -> list[Study]:
        with closing(self._conn.execute("SELECT * FROM studies ORDER BY started_at")) as cur:
            return [self._study(row) for row in cur.fetchall()]

    def latest_study(self) -> Study | None:
        studies = self.studies()
        return studies[-1] if studies else None

    @staticmethod
    def _study(row: sqlite3.Row) -> Study:
        env = json.loads(row["environment"]) if row["environment"] else None
        target_envs = json.loads(row["target_environments"]) if row["target_environments"] else {}
        return Study(
            id=row["id"],
            name=row["name"],
            target=row["target"],
            status=row["status"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            params=json.loads(row["params"]),
            pgrig_version=row["pgrig_version"],
            environment=from_dict(Environment, env) if env else None,
            target_environments={k: from_dict(Environment, v) for k, v in target_envs.items()},
        )

    # -- runs ------------------------------------------------------------

    def record(self, rec: RunRecord) -> RunRecord:
        """Write one finished run. A key already recorded in this study is an error:
        a run is never recorded twice."""
        with self._tx() as conn:
            try:
                cur = conn.execute(
                    "INSERT INTO runs (study_id, key, kind, target, params, status, reason, result,"
                    " raw, tool_versions, started_at, finished_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        rec.study,
                        rec.key,
                        rec.kind,
                        rec.target,
                        _dumps(rec.params),
                        rec.status,
                        rec.reason,
                        _dumps(rec.result) if rec.result is not None else None,
                        rec.raw,
                        _dumps(rec.tool_versions),
                        rec.started_at,
                        rec.finished_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(
                    f"run {rec.key!r} is already recorded in study {rec.study}"
                ) from exc
        return RunRecord(**{**rec.__dict__, "id": cur.lastrowid})

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
        for rec in other.runs(study_id):
            self.record(replace(rec, study=new_id, id=None))
        return new_id

    def runs(self, study_id: str) -> list[RunRecord]:
        with closing(
            self._conn.execute("SELECT * FROM runs WHERE study_id = ? ORDER BY id", (study_id,))
        ) as cur:
            rows = cur.fetchall()
        return [
            RunRecord(
                id=row["id"],
                study=row["study_id"],
                key=row["key"],
                kind=row["kind"],
                target=row["target"],
                params=json.loads(row["params"]),
                status=row["status"],
                reason=row["reason"],
                result=json.loads(row["result"]) if row["result"] else None,
                raw=row["raw"],
                tool_versions=json.loads(row["tool_versions"]),
                started_at=row["started_at"],
                finished_at=row["finished_at"],
            )
            for row in rows
        ]
