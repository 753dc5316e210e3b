"""The software a study runs: tool versions, and the PostgreSQL server's version
and settings."""

from __future__ import annotations

import logging
import os
import platform
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pgrig
from pgrig.environment.sources import VERSION_TIMEOUT
from pgrig.errors import ToolError
from pgrig.hosts.executor import C_LOCALE
from pgrig.hosts.local import HERE
from pgrig.pgsource import cache
from pgrig.pgsource.model import version_key
from pgrig.pgsource.system import version_of
from pgrig.results import PostgresInfo
from pgrig.sql import load as load_sql

log = logging.getLogger(__name__)

# PostgreSQL programs whose version is recorded, looked up in bin_dir (or PATH).
PG_TOOLS: tuple[str, ...] = (
    "postgres", "pgbench", "psql", "pg_test_fsync", "pg_test_timing", "pg_basebackup",
)  # fmt: skip

CONNECT_TIMEOUT = 10

SERVER_VERSION_SQL = (
    "SELECT current_setting('server_version'), current_setting('server_version_num')::int, "
    "version()"
)
DATA_DIRECTORY_SQL = "SELECT current_setting('data_directory')"
# Facts fixed at initdb or build time that a reader needs to compare results
# (checksums cost writes, segment and block sizes change I/O); pg_settings
# reports them as 'default' when they have their usual value, so they are
# asked for by name. Names a server does not know simply do not match.
PRESET_SETTINGS: tuple[str, ...] = (
    "block_size",
    "data_checksums",
    "lc_collate",
    "lc_ctype",
    "server_encoding",
    "shared_memory_size",
    "shared_memory_size_in_huge_pages",
    "wal_block_size",
    "wal_segment_size",
)
# The non-default settings and PRESET_SETTINGS (its parameter).
SETTINGS_SQL = load_sql("environment_settings")


def first_line(text: str) -> str | None:
    """The first non-empty line: what ``--version`` prints, e.g. ``"fio-3.33"``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def tool_version(program: str | Path) -> str | None:
    """``program --version``'s first line, or None when it is missing or fails."""
    try:
        done = HERE.run(
            [str(program), "--version"], timeout=VERSION_TIMEOUT, env=C_LOCALE, check=False
        )
    except ToolError:
        return None
    if not done.ok:
        return None
    return first_line(done.stdout) or first_line(done.stderr)


def tool_versions(
    bin_dir: Path | None = None, locate: Callable[[str], Path] | None = None
) -> dict[str, str]:
    """Versions of the programs a study runs; programs not found are absent.
    ``locate``: where each program really is (``PgBinaries.path``: a server-only
    build's pgbench is a newer installation's), else ``bin_dir``, else PATH."""
    versions = {"python": platform.python_version(), "pgrig": pgrig.__version__}

    def where(name: str) -> str | Path | None:
        if locate is not None:
            return locate(name)
        return bin_dir / name if bin_dir is not None else shutil.which(name)

    programs: dict[str, str | Path | None] = {name: where(name) for name in PG_TOOLS}
    programs["fio"] = shutil.which("fio")
    for name, program in programs.items():
        if program is None or not os.path.isfile(program) or not os.access(program, os.X_OK):
            continue
        version = tool_version(program)
        if version:
            versions[name] = version
    return versions


def read_postgres(
    conninfo: Mapping[str, object] | str, *, bin_dir: Path | None = None
) -> PostgresInfo | None:
    """Version and non-default settings of a running server; None when it cannot be reached."""
    import psycopg  # here: the environment is read by commands that never connect

    # A cluster initialised in the C locale is SQL_ASCII, and psycopg then returns
    # bytes instead of str; asking for UTF8 gets text back (settings are ASCII).
    params: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT, "client_encoding": "UTF8"}
    dsn = ""
    if isinstance(conninfo, str):
        dsn = conninfo
    else:
        params.update(conninfo)
    try:
        with psycopg.connect(dsn, autocommit=True, **params) as conn:
            row = conn.execute(SERVER_VERSION_SQL).fetchone()
            assert row is not None
            version, version_num, build = str(row[0]), int(row[1]), str(row[2])
            try:
                dd = conn.execute(DATA_DIRECTORY_SQL).fetchone()
                data_directory = str(dd[0]) if dd else None
            except psycopg.Error:
                # Needs superuser or pg_read_all_settings.
                data_directory = None
            settings = {
                str(name): str(value)
                for name, value in conn.execute(SETTINGS_SQL, [list(PRESET_SETTINGS)])
            }
    except psycopg.Error as exc:
        log.warning("environment: cannot read PostgreSQL settings: %s", exc)
        return None
    return PostgresInfo(
        version=version,
        version_num=version_num,
        bin_dir=str(bin_dir) if bin_dir is not None else None,
        data_directory=data_directory,
        settings=settings,
        build=build,
        source=_source(bin_dir, version),
    )


def _source(bin_dir: Path | None, server_version: str) -> str | None:
    """Where the server's binaries came from, when ``bin_dir`` holds that very
    release (an existing server elsewhere may run another build)."""
    if bin_dir is None or not (bin_dir / "postgres").is_file():
        return None
    here = version_of(bin_dir / "postgres")
    release = server_version.split()[0]
    if here is None or version_key(here) != version_key(release):
        return None
    return cache.source_of(bin_dir)
