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
import urllib.parse
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import cast

from pgrig import files
from pgrig.conninfo import Conn
from pgrig.errors import (
    DiskSpaceError,
    PgrigError,
    StoreError,
    StudyExists,
    UnknownStudy,
    UsageError,
)
from pgrig.results import (
    SCHEMA_VERSION,
    Environment,
    JsonValue,
    RunRecord,
    Status,
    Study,
    StudyStatus,
    from_dict,
    shape_problem,
    to_dict,
)
from pgrig.sql import load as load_sql
from pgrig.store import backends
from pgrig.store.backends import Backend, Postgres, Row, Sqlite, damaged

_INSERT_RUN = load_sql("store_insert_run")
_REKEY = "UPDATE runs SET key = ? WHERE study_id = ? AND key = ?"


def _text(row: Row, column: str) -> str:
    """A TEXT column that is never NULL (the schema says which)."""
    return cast(str, row[column])


def _maybe_text(row: Row, column: str) -> str | None:
    return cast("str | None", row[column])


def location(results: Path, store: str | None) -> Path | str:
    """Where the results are: ``--store`` (a file or a PostgreSQL URI), else
    ``RESULTS/results.sqlite``. A URI of another database is refused: it used to
    become a file named ``mysql:/u@h/db``."""
    if store is None:
        return results / "results.sqlite"
    scheme = store.partition("://")[0] if "://" in store else None
    if scheme is not None and scheme not in ("postgresql", "postgres"):
        raise UsageError(
            f"--store {_masked(store) if is_uri(store) else store}: pgrig keeps its results in a"
            f" SQLite file or a PostgreSQL database, not {scheme}://",
            hint="pass --store a file path (results.sqlite) or a postgresql:// URI",
        )
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


def _is_export(location: Path | str) -> bool:
    try:
        with open(location, "rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and b'"schema"' in head


def _open_error(location: Path | str, exc: Exception) -> PgrigError:
    """Why a store could not be opened, with what to do about a damaged file."""
    if isinstance(exc, StoreError):  # a lock waited for, a damaged record: said already
        return exc
    damaged = isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in str(exc) or "malformed" in str(exc)
    )
    # a PostgreSQL store that cannot be reached is bad input, as an unreachable --dsn is
    error = UsageError if is_uri(location) and not isinstance(exc, sqlite3.Error) else StoreError
    return error(
        f"cannot open results store {_masked(location)}: "
        f"{str(exc).strip().replace(str(location), _masked(location))}",
        hint=f"the file is damaged: `sqlite3 {location} .recover | sqlite3 "
        "recovered.sqlite` may save its studies; move it aside "
        f"(mv {location} {location}.bad) to start a new one"
        if damaged
        else "pass --store with a writable file path or a reachable PostgreSQL URI",
    )


# The tables every pgrig store has had, from the first schema on.
_OURS = frozenset({"studies", "runs"})


def _refuse_foreign(path: Path) -> None:
    """Refuse, before anything is written to it, a file that is no pgrig store:
    an empty file (`pgrig list` used to write a schema into it), another
    program's SQLite database (it used to get pgrig's tables added), or bytes
    that are no database. Read through a read-only connection."""
    if not path.exists() and not path.is_symlink():
        return  # a new store
    if (why := files.not_a_file(path)) is not None:  # a directory read "unable to open", exit 1
        raise UsageError(
            f"results store {path} {why}",
            hint=f"pass --store a file path (e.g. {path / 'results.sqlite'})"
            if path.is_dir()
            else "pass --store a file path (results.sqlite)",
        )
    if path.stat().st_size == 0:
        raise UsageError(
            f"results store {path} is an empty file, not a pgrig store; it was left as it is",
            hint=f"remove it (rm {path}) and pgrig creates a new store there, or pass --store"
            " with another file",
        )
    if _is_export(path):  # it read "damaged", with sqlite3 .recover (issue 40.6)
        raise UsageError(
            f"{path} is a pgrig export (JSON), not a results store (SQLite); it was left as it is",
            hint="give the results.sqlite it was exported from (pgrig import reads stores); "
            "an export is for other tools (docs/export.md)",
        )
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=backends.LOCK_GLANCE_S)) as ro:
            tables = {
                r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc):
            return  # open() waits for it, announced
        raise damaged(path, str(exc)) from exc
    if tables and not tables >= _OURS:
        raise UsageError(
            f"{path} is another program's SQLite database (tables {', '.join(sorted(tables))}),"
            " not a pgrig results store; nothing was added to it",
            hint="pass --store with a new file or a pgrig store (results.sqlite)",
        )


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Store:
    """A results store. Open with ``Store.open(path_or_uri)``; safe to reopen."""

    def __init__(self, backend: Backend, path: Path | str) -> None:
        self._db = backend
        self.path = path
        self.version = SCHEMA_VERSION  # as written in the store's meta table

    @classmethod
    def open(cls, location: Path | str) -> Store:
        uri = is_uri(location)
        if not uri:
            _refuse_foreign(Path(location))
        try:
            backend: Backend = Postgres(str(location)) if uri else Sqlite(Path(location))
        except Exception as exc:  # sqlite3.Error, psycopg.Error, OSError; ours as they are
            raise _open_error(location, exc) from exc
        rows = backend.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        if not rows:
            # A new store: its schema's version, in one statement (a pgrig making
            # the same store at the same moment wrote the same row: left as it is).
            backend.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
                " ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
        store = cls(backend, location if uri else Path(location))
        if uri:
            store.path = backend.label
        if not rows:
            store.version = SCHEMA_VERSION
        elif not _text(rows[0], "value").isdigit():
            backend.close()
            raise damaged(location, f"its schema_version is {_text(rows[0], 'value')!r}")
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
    def _tx(self) -> Iterator[Backend]:
        try:
            self._db.begin()
        except self._db.errors as exc:
            raise StoreError(f"cannot write to results store {self.path}: {exc}") from exc
        try:
            yield self._db
        except self._db.errors as exc:  # a lock or statement timeout, a lost server
            self._db.rollback()
            if "full" in str(exc):  # SQLite's "database or disk is full"
                raise DiskSpaceError(
                    f"results store {self.path} is full: {exc}; what this write held is "
                    "not recorded",
                    hint="free some space there, then run the same command again: the study "
                    "resumes and runs what is not recorded",
                ) from exc
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

    def begin_study(self, study: Study) -> Study:
        """Write a new study; the study as the store gives it back (its params
        and environment as JSON, decoded from the row written, not read again)."""
        row: Row = {
            "id": study.id,
            "name": study.name,
            "target": study.target,
            "status": study.status,
            "started_at": study.started_at,
            "finished_at": study.finished_at,
            "params": _dumps(study.params),
            "pgrig_version": study.pgrig_version,
            "environment": _dumps(to_dict(study.environment)) if study.environment else None,
        }
        stored = _study({**row, "target_environments": None}, self.path)
        with self._tx() as conn:
            try:
                conn.execute(
                    f"INSERT INTO studies ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                    tuple(row.values()),
                )
            except self._db.duplicate as exc:
                raise StudyExists(f"{self.path} already holds a study {study.id!r}") from exc
        return stored

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
        found = self.find_study(study_id)
        if found is None:
            known = ", ".join(s.id for s in self.studies()[-5:]) or "none"
            raise UnknownStudy(
                f"no study {study_id!r} in {self.path}",
                hint=f"recent studies: {known} (see `pgrig list`)",
            )
        return found

    def find_study(self, study_id: str) -> Study | None:
        """The study of this id; None when the store holds none."""
        rows = self._db.execute("SELECT * FROM studies WHERE id = ?", (study_id,))
        return _study(rows[0], self.path) if rows else None

    def studies(self) -> list[Study]:
        rows = self._db.execute("SELECT * FROM studies ORDER BY started_at, id")
        return [_study(row, self.path) for row in rows]

    def series(self, name: str) -> list[Study]:
        """The studies of one campaign name (a series), in the order they started."""
        rows = self._db.execute(
            "SELECT * FROM studies WHERE name = ? ORDER BY started_at, id", (name,)
        )
        return [_study(row, self.path) for row in rows]

    def latest_study(self) -> Study | None:
        studies = self.studies()
        return studies[-1] if studies else None

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
        self, conn: Backend, run_id: int, samples: Iterable[Mapping[str, object]]
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
        kinds = tuple(without_samples)
        result, params = _lean_result(self._db, without_samples, without_progress)
        sql = f"SELECT {_RUN_COLUMNS}, {result} AS result FROM runs WHERE study_id = ? ORDER BY id"
        with closing(self._db.each(sql, (*params, study_id))) as rows:
            out = [_record(row, self.path) for row in rows]
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

    def keys(self, study_id: str, status: str | None = None) -> set[str]:
        """The keys of the study's records (those of one ``status``), nothing else of them."""
        sql = "SELECT key FROM runs WHERE study_id = ?" + (" AND status = ?" if status else "")
        rows = self._db.each(sql, (study_id, status) if status else (study_id,))
        return {str(row["key"]) for row in rows}

    def rekey(self, study_id: str, renames: Mapping[str, str]) -> None:
        """Records of the study moved to new keys (old -> new), in one transaction."""
        with self._tx() as conn:
            for old, new in renames.items():
                conn.execute(_REKEY, (new, study_id, old))

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


def import_study(into: Store, other: Store, study_id: str, *, as_id: str | None = None) -> str:
    """Copy one study and its runs from another results file (another machine's)."""
    study = other.study(study_id)
    new_id = as_id or study.id
    if any(s.id == new_id for s in into.studies()):
        raise StoreError(
            f"{into.path} already holds a study {new_id!r}",
            hint="import it under another name with --as NEW_ID",
        )
    records = importable(other, study_id)
    into.begin_study(replace(study, id=new_id, status=study.status))
    try:
        for env_target, env in study.target_environments.items():
            into.set_target_environment(new_id, env_target, env)
        if study.finished_at:
            into.finish_study(new_id, study.status, study.finished_at)
        for rec in records:
            samples = other.samples(rec.id) if rec.id is not None else None
            into.record(replace(rec, study=new_id, id=None), samples)
    except BaseException:  # damaged samples, a full disk, Ctrl-C: no half copy
        _forget(into, new_id)
        raise
    return new_id


def importable(other: Store, study_id: str) -> list[RunRecord]:
    """The records of a study to import, each read and its result checked against
    its kind's record type before anything is written: a damaged record refuses
    the import whole (a tps held as a string was imported, then failed every
    report, history, check and export of it)."""
    from pgrig import registry  # the registry's kinds import the store's users

    records = other.runs(study_id, without_samples=other.kinds(study_id))
    for rec in records:
        kind = registry.kind(rec.kind)
        if kind is None or rec.status != "ok" or rec.result is None:
            continue
        if (problem := shape_problem(kind.type, rec.result)) is not None:
            raise UsageError(
                f"{other.path}: the result of {study_id}/{rec.key} ({rec.kind}) is not a record "
                f"pgrig wrote: {problem}; nothing was imported",
                hint="import the store pgrig wrote, or the other studies of this one "
                "(pgrig import SOURCE STUDY_ID ...)",
            )
    return records


def _forget(store: Store, study_id: str) -> None:
    """Remove a study and everything recorded with it (an import cut short)."""
    with store._tx() as conn:
        conn.execute(
            "DELETE FROM samples WHERE run_id IN (SELECT id FROM runs WHERE study_id = ?)",
            (study_id,),
        )
        conn.execute("DELETE FROM runs WHERE study_id = ?", (study_id,))
        conn.execute("DELETE FROM studies WHERE id = ?", (study_id,))


def _lean_result(
    db: Backend, without_samples: Collection[str], without_progress: Collection[str]
) -> tuple[str, list[str]]:
    """SQL of a run's result with the lists its kind comes without emptied (by
    the database), and the kinds it names as parameters."""
    lists: dict[str, tuple[str, ...]] = {}  # kind -> the lists its result comes without
    for key, kinds_of in (("samples", without_samples), ("progress", without_progress)):
        for kind in kinds_of:
            lists[kind] = (*lists.get(kind, ()), key)
    result, params = "result", []
    if lists:
        whens = []
        for keys in sorted(set(lists.values())):
            same = [k for k, v in lists.items() if v == keys]
            lean = "result"
            for key in keys:
                lean = db.lean(lean, key)
            whens.append(f"WHEN kind IN ({', '.join('?' * len(same))}) THEN {lean}")
            params += same
        result = f"CASE {' '.join(whens)} ELSE result END"
    return result, params


_SAMPLES_SQL = "SELECT value FROM samples WHERE run_id = ? ORDER BY n"
_RUN_COLUMNS = (
    "id, study_id, key, kind, target, params, status, reason, raw, tool_versions,"
    " started_at, finished_at"
)


def _study(row: Row, store: Path | str) -> Study:
    try:
        env = json.loads(_text(row, "environment")) if row["environment"] else None
        envs = row["target_environments"]
        target_envs = json.loads(_text(row, "target_environments")) if envs else {}
        params = json.loads(_text(row, "params"))
    except ValueError as exc:  # it was a traceback in `pgrig import` (issue 40.6)
        raise damaged(store, f"study {_text(row, 'id')} is not valid JSON ({exc})") from exc
    if not isinstance(params, dict):
        raise damaged(store, f"the params of study {_text(row, 'id')} are not a JSON object")
    return Study(
        id=_text(row, "id"),
        name=_text(row, "name"),
        target=_text(row, "target"),
        status=cast(StudyStatus, row["status"]),
        started_at=_text(row, "started_at"),
        finished_at=_maybe_text(row, "finished_at"),
        params=params,
        pgrig_version=_text(row, "pgrig_version"),
        environment=from_dict(Environment, env) if env else None,
        target_environments={k: from_dict(Environment, v) for k, v in target_envs.items()},
    )


def _record(row: Row, store: Path | str) -> RunRecord:
    try:
        result = json.loads(_text(row, "result")) if row["result"] else None
        params = json.loads(_text(row, "params"))
        tool_versions = json.loads(_text(row, "tool_versions"))
    except ValueError as exc:  # a result held as text, decoded here
        what = f"the record {_text(row, 'study_id')}/{_text(row, 'key')} is not valid JSON"
        raise damaged(store, f"{what} ({exc})") from exc
    return RunRecord(
        id=cast("int | None", row["id"]),
        study=_text(row, "study_id"),
        key=_text(row, "key"),
        kind=_text(row, "kind"),
        target=_text(row, "target"),
        params=params,
        status=cast(Status, row["status"]),
        reason=_maybe_text(row, "reason"),
        result=result,
        raw=_text(row, "raw"),
        tool_versions=tool_versions,
        started_at=_text(row, "started_at"),
        finished_at=_text(row, "finished_at"),
    )
