"""Loaded data, recognised by what made it, so a later study reuses it.

A load that may be kept writes one row into ``pgrig_loaded`` (in the
database it loaded): what made the data - the workload and its size, the
layout, the loader, the PostgreSQL version and the settings the server ran
with - its result, and a fingerprint of the tables it wrote (their file
nodes: a table dropped and created again by anyone else no longer matches).
A later load with the same identity finds that row and reuses the data
instead of loading again; any difference (another version, profile, scale or
loader) loads anew and replaces the row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import psycopg

from pgrig.results import JsonValue

TABLE = "pgrig_loaded"
CREATE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    workload text PRIMARY KEY,
    identity jsonb NOT NULL,
    fingerprint text NOT NULL,
    result jsonb NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now())"""


# Settings that name where this cluster lives, not how it behaves.
PLACE = ("port", "unix_socket_directories", "listen_addresses", "data_directory", "hba_file",
         "ident_file", "config_file", "external_pid_file", "log_directory", "log_filename",
         "cluster_name")  # fmt: skip


def identity(db: psycopg.Connection, **what: JsonValue) -> dict[str, JsonValue]:
    """What made a load: ``what`` (workload, size, layout, loader), the server's
    version, and a digest of the settings it runs with from its configuration
    files and command line (the profile and the overrides)."""
    version = db.execute("SHOW server_version_num").fetchone()
    settings: dict[str, str] = dict(
        db.execute(
            "SELECT name, setting FROM pg_settings"
            " WHERE source IN ('configuration file', 'command line') AND name <> ALL(%s)",
            (list(PLACE),),
        ).fetchall()
    )
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return {**what, "server_version_num": version[0] if version else "", "settings": digest}


def fingerprint(db: psycopg.Connection, tables: str) -> str:
    """The file nodes of the tables whose names match the LIKE pattern ``tables``."""
    rows = db.execute(
        "SELECT relname, relfilenode FROM pg_class WHERE relname LIKE %s AND relkind = 'r'"
        " ORDER BY relname",
        (tables,),
    ).fetchall()
    return ",".join(f"{name}:{node}" for name, node in rows)


def find(
    db: psycopg.Connection, who: Mapping[str, JsonValue], tables: str
) -> dict[str, JsonValue] | None:
    """The stored result of a load with this identity whose tables are still
    the ones it wrote; else None."""
    exists = db.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()
    if not (exists and exists[0]):
        return None
    row = db.execute(
        f"SELECT identity, fingerprint, result FROM {TABLE} WHERE workload = %s",
        (who["workload"],),
    ).fetchone()
    if row is None or row[0] != who or row[1] != fingerprint(db, tables):
        return None
    return dict(row[2])


def mark(
    db: psycopg.Connection, who: Mapping[str, JsonValue], tables: str, result: Mapping[str, object]
) -> None:
    """Record a finished load (replacing the row of an earlier one)."""
    db.execute(CREATE)
    db.execute(
        f"INSERT INTO {TABLE} (workload, identity, fingerprint, result) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (workload) DO UPDATE SET identity = excluded.identity,"
        " fingerprint = excluded.fingerprint, result = excluded.result, loaded_at = now()",
        (who["workload"], json.dumps(who), fingerprint(db, tables), json.dumps(result)),
    )


def forget(db: psycopg.Connection, workload: str) -> None:
    """Before a load replaces the data: a load that fails half-way is never reused."""
    exists = db.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()
    if exists and exists[0]:
        db.execute(f"DELETE FROM {TABLE} WHERE workload = %s", (workload,))
