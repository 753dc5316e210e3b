"""An existing server (``dsn = "host=db1 user=bench"``): connected to, never
created, restarted or removed; workloads that drop data need ``--yes``. A
directory beside it is where the probes run."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from pgrig.cluster import workdir
from pgrig.conninfo import Conn, check_pg_environment, libpq_reason, refused_hint
from pgrig.errors import ClusterError, UsageError
from pgrig.pgsource import binaries
from pgrig.registry.target import (
    OWN_CONNECTIONS,
    Checked,
    Demands,
    Target,
    TargetKind,
    capture,
    directory_option,
)
from pgrig.targets.throwaway import find_binaries
from pgrig.ui import Ui

if TYPE_CHECKING:
    from pgrig.registry.target import TargetSpec


# The libpq variables that name a server when no dsn is given (the quick study
# then tests that server), and with the user, those a message names.
PG_SERVER_VARS = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE", "PGDATABASE")
# Every other variable libpq reads (its "Environment Variables" page, PGPASSWORD
# left out): a bad PGSSLMODE breaks the connection as surely as a bad PGHOST.
PG_VARIABLES = (
    *PG_SERVER_VARS,
    "PGUSER", "PGSERVICEFILE", "PGPASSFILE", "PGOPTIONS", "PGAPPNAME", "PGCONNECT_TIMEOUT",
    "PGCLIENTENCODING", "PGTARGETSESSIONATTRS", "PGLOADBALANCEHOSTS", "PGSSLMODE",
    "PGSSLNEGOTIATION", "PGREQUIRESSL", "PGSSLCOMPRESSION", "PGSSLCERT", "PGSSLKEY",
    "PGSSLCERTMODE", "PGSSLROOTCERT", "PGSSLCRL", "PGSSLCRLDIR", "PGSSLSNI", "PGREQUIREPEER",
    "PGSSLMINPROTOCOLVERSION", "PGSSLMAXPROTOCOLVERSION", "PGGSSENCMODE", "PGKRBSRVNAME",
    "PGGSSLIB", "PGGSSDELEGATION", "PGCHANNELBINDING", "PGREQUIREAUTH",
)  # fmt: skip


def source_of(spec: TargetSpec, source: str) -> str:
    """Where an existing server came from (--dsn, a campaign's dsn, the PG*
    variables), to name it in a message; ``source``: ``Demands.source``."""
    if spec.dsn:
        return "--dsn" if source == "command line" else f"target {spec.name} dsn"
    given = [f"{v}={os.environ[v]}" for v in PG_VARIABLES if os.environ.get(v)]
    return "the PG* environment" + (f" ({', '.join(given)})" if given else "")


# The existing server's settings and sessions: one catalog query.
CHECK_TIMEOUT_MS = 10_000


def _room(spec: TargetSpec, demands: Demands) -> None:
    """A server given by a DSN or the PG* variables must answer now - not after
    the study was created - and have room for the workload's clients."""
    assert spec.dsn is not None
    if not spec.dsn:
        check_pg_environment("libpq reads it")
    conn = Conn.from_user(spec.dsn)
    source = source_of(spec, demands.source)
    try:
        with conn.connect() as db:
            db.execute(f"SET statement_timeout = {CHECK_TIMEOUT_MS}")  # a hung server: refused
            row = db.execute(
                "SELECT current_setting('max_connections')::int,"
                " current_setting('superuser_reserved_connections')::int,"
                " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
                " (SELECT count(*) FROM pg_stat_activity"
                "   WHERE backend_type = 'client backend')::int"
            ).fetchone()
    except (ClusterError, psycopg.Error) as exc:
        # libpq's own reason, once: connect() wraps it in a "cannot connect to" of
        # its own; the PG* environment's connection is named by its variables
        why = exc.__cause__ if isinstance(exc, ClusterError) and exc.__cause__ else exc
        to = f" to {conn.describe()}" if spec.dsn else ""
        raise UsageError(
            f"{source}: cannot connect{to}: {libpq_reason(why)}",
            hint=refused_hint(
                str(why), "the dsn" if spec.dsn else "those PG* variables (or pass --throwaway)"
            ),
        ) from exc
    if row is None or not demands.clients:
        return
    limit, reserved, superuser, in_use = row
    room = limit - (0 if superuser else reserved) - in_use
    if demands.clients + OWN_CONNECTIONS > room:
        raise UsageError(
            f"{source}: workload {demands.clients_of} opens {demands.clients} client "
            f"connections (+{OWN_CONNECTIONS} of pgrig's own), but the server allows {limit} "
            f"(max_connections), {in_use} in use"
            + ("" if superuser else f", {reserved} reserved for superusers"),
            hint="raise max_connections on that server (it needs a restart), or lower the "
            "workload's clients",
        )


class ServerKind(TargetKind[None, None]):
    name = "server"
    order = 30
    summary = "an existing server (dsn): connected to, never created, restarted or removed"
    creates_server = False

    def claims(self, spec: TargetSpec, power_loss: str | None) -> bool:
        return spec.dsn is not None

    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        assert spec.dsn is not None
        if demands.restore:
            raise UsageError(
                f'target {spec.name}: reset = "restore" drops and recreates a '
                "database, which pgrig only does in clusters it creates",
                hint='use reset = "reuse" for existing servers',
            )
        if demands.destructive and not demands.yes:
            raise UsageError(
                f"{source_of(spec, demands.source)}: refusing to touch the existing server: "
                f"{demands.destructive}",
                hint="pass --yes if that is what you want, or let pgrig create a throwaway "
                "cluster"
                + (
                    " (pass --throwaway: the PG* variables name a server)"
                    if not spec.dsn
                    else " (drop the dsn)"
                ),
            )
        bins = find_binaries(spec, binaries.CLIENT_TOOLS)
        directory = (
            workdir.check_target(spec.directory, option=directory_option(spec, demands.source))
            if spec.directory
            else None
        )
        Conn.from_user(spec.dsn)
        for option in ("tablespace", "index_tablespace"):
            value = getattr(spec, option)
            if value and value.startswith("/"):
                raise UsageError(
                    f"target {spec.name}: {option} {value}: on an existing server give "
                    "the name of an existing tablespace, not a directory",
                    hint="pgrig creates tablespaces in directories only in its own cluster",
                )
        if demands.power_loss is not None:
            raise UsageError(
                f"target {spec.name}: workload {demands.power_loss} cuts the power of the "
                "cluster's filesystem, which cannot cover dsn",
                hint="give that target a directory only (data directory and WAL go on the "
                "lossy filesystem together)",
            )
        _room(spec, demands)
        return Checked(bins, None, directory, owned=demands.yes, where=self.where(spec)[0])

    @contextlib.contextmanager
    def server(
        self, t: Target, name: str, study: str, ui: Ui, *, keep: Callable[[], bool]
    ) -> Iterator[None]:
        assert t.spec.dsn is not None
        conn = Conn.from_user(t.spec.dsn)
        with conn.connect():
            pass
        with t.scoped(conn=conn):
            capture(t)
            yield

    def describe(self, t: Target) -> dict[str, Any]:
        assert t.spec.dsn is not None
        return {"kind": self.name, "dsn": Conn.from_user(t.spec.dsn).describe()}

    def where(self, spec: TargetSpec) -> tuple[str, Path | None]:
        assert spec.dsn is not None
        return Conn.from_user(spec.dsn).describe(), spec.directory

    def label(self, t: Target) -> str:
        assert t.spec.dsn is not None
        return Conn.from_user(t.spec.dsn).describe()


KIND = ServerKind()
