"""Where the server under test is, in libpq's own terms.

A ``Conn`` is a libpq connection string: a URI or ``key=value`` pairs given by
the user (``--dsn``), else the ``PG*`` environment variables, else the socket
of the throwaway cluster. The same string goes to psycopg and, as pgbench's
``dbname`` argument (which libpq expands), to pgbench - so both always talk to
the same server.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgrig.errors import ClusterError, UsageError, mask_secrets

CONNECT_TIMEOUT_S = 10
# What pgrig's own sessions are called in pg_stat_activity (pgbench calls its own "pgbench").
APPLICATION_NAME = "pgrig"

# Settings a server may run with that fail pgrig's own sessions - its CREATE
# DATABASE, its loads and setups, the monitor's queries: statement_timeout = 1
# and default_transaction_read_only = on ended in tracebacks with a failed
# study (issue 40.4). Those sessions run with PostgreSQL's defaults for them
# (``guarded``); the benchmark's clients run with the server's.
SESSION_DEFAULTS = {
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "idle_session_timeout": "0",
    "transaction_timeout": "0",
    "default_transaction_read_only": "off",
}


def check_pg_environment(reads_it: str) -> None:
    """PGPORT that is no port, refused naming it: libpq, initdb and the server
    all read it (``PGPORT=abc --throwaway`` blamed "profile oltp"); and a
    PGSSLMODE libpq does not know, which every connection pgrig opens reads."""
    port = os.environ.get("PGPORT")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise UsageError(
            f"PGPORT={port!r} is not a port number, and {reads_it}",
            hint="unset PGPORT or give a number, e.g. PGPORT=5432",
        )
    mode = os.environ.get("PGSSLMODE")
    if mode is not None and mode not in SSLMODES:  # pgrig's own connections waited 120 s
        raise UsageError(
            f"PGSSLMODE={mode} is not an sslmode libpq knows",
            hint=f"unset PGSSLMODE or use one of: {', '.join(SSLMODES)}",
        )

    _check_libpq_reads_the_environment()


SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

# A socket nobody serves: what libpq says when it tries it is the proof that
# it took the PG* environment.
_NOWHERE = "/nonexistent/pgrig-env-check"
_SECRET = ("PGPASSWORD", "PGPASSFILE")


def _check_libpq_reads_the_environment() -> None:
    """Every other PG* value libpq refuses (PGGSSENCMODE, PGTARGETSESSIONATTRS,
    PGCHANNELBINDING, PGSERVICE that names no service, ...), said in libpq's
    words with the variables set: PGGSSENCMODE=junk --throwaway ran two minutes
    and then said "server did not accept connections". libpq checks them before it
    tries a host, so a connection to a socket nobody serves tells."""
    given = sorted(k for k in os.environ if k.startswith("PG") and not k.startswith("PGRIG"))
    if not given:
        return
    try:
        psycopg.connect(f"host={_NOWHERE} port=1", connect_timeout=2).close()
    except psycopg.Error as exc:
        said = str(exc).strip().removeprefix("connection is bad: ").splitlines()[0]
        if _NOWHERE in said or "connection to server" in said or "timeout" in said:
            return
        shown = ", ".join(f"{k}={os.environ[k]}" for k in given if k not in _SECRET)
        raise UsageError(
            f"libpq refuses the PG* environment ({shown}): {said}",
            hint="unset or fix the variable it names (pgrig and pgbench connect with libpq)",
        ) from None


def libpq_reason(exc: BaseException) -> str:
    """libpq's (psycopg's) reason a connection failed, with the host it tried:
    a PGHOST that does not resolve read "failed to resolve host None"."""
    said = str(exc).strip()
    if (host := os.environ.get("PGHOST")) is not None:
        said = said.replace("host None", f"host {host!r} (PGHOST)")
    return said


def refused_hint(why: str, fix: str) -> str:
    """What to do about a connection that failed: a FATAL came from a server that
    answered (a pg_hba.conf rule, a database or role that does not exist), so
    starting it is not the fix. ``fix``: what names the connection ("the dsn")."""
    if "FATAL:" in why:
        return (
            f"the server answered and refused: fix the user or database in {fix}, "
            "or its pg_hba.conf"
        )
    return f"start that server, or fix {fix}"


@dataclass(frozen=True)
class Conn:
    dsn: str = ""  # "" means: whatever the PG* environment variables say
    # libpq options pgrig's own sessions add ("-c statement_timeout=0"): never
    # given to the benchmark's clients (``args``), only to ``connect`` and ``env(own=True)``
    own: str = ""

    def guarded(self, settings: Iterable[str]) -> Conn:
        """This connection with pgrig's own sessions at PostgreSQL's defaults for
        those of ``settings`` (the server's, by name) that would fail them;
        named only when set: an older server refuses a parameter it lacks."""
        named = [n for n in SESSION_DEFAULTS if n in {s.lower() for s in settings}]
        return replace(self, own=" ".join(f"-c {n}={SESSION_DEFAULTS[n]}" for n in named))

    @classmethod
    def socket(cls, socket_dir: str, port: int, user: str, dbname: str) -> Conn:
        return cls(make_conninfo(host=socket_dir, port=str(port), user=user, dbname=dbname))

    @classmethod
    def tcp(cls, host: str, port: int, user: str, dbname: str, password: str) -> Conn:
        return cls(make_conninfo(host=host, port=str(port), user=user, dbname=dbname,
                                 password=password))  # fmt: skip

    @classmethod
    def from_user(cls, dsn: str | None, *, what: str = "--dsn") -> Conn:
        """``--dsn`` as given (URI or key=value), validated by libpq's own parser;
        ``what`` names where it came from in the message."""
        if not dsn:
            return cls("")
        try:
            conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise UsageError(
                f"{what} {mask_secrets(repr(dsn))} is not valid: {mask_secrets(str(exc).strip())}",
                hint="use a URI like postgresql://user@host:5432/db or 'host=... dbname=...'",
            ) from exc
        return cls(dsn)

    def conninfo(self) -> str:
        """For pgrig's own sessions: with the connect timeout and ``own``'s options."""
        info = make_conninfo(self.dsn, connect_timeout=str(CONNECT_TIMEOUT_S))
        # A DBA looking at pg_stat_activity sees which sessions are pgrig's;
        # a name the user gave (in the dsn or PGAPPNAME) is kept.
        if "application_name" not in conninfo_to_dict(info) and not os.environ.get("PGAPPNAME"):
            info = make_conninfo(info, application_name=APPLICATION_NAME)
        if self.own:
            given = conninfo_to_dict(info).get("options") or os.environ.get("PGOPTIONS", "")
            info = make_conninfo(info, options=f"{given} {self.own}".strip())
        return info

    def with_dbname(self, dbname: str) -> Conn:
        return replace(self, dsn=make_conninfo(self.dsn, dbname=dbname))

    def with_params(self, **params: str) -> Conn:
        """This connection with libpq parameters added (an application_name)."""
        return replace(self, dsn=make_conninfo(self.dsn, **params))

    def args(self) -> list[str]:
        """The positional dbname argument for pgbench and psql (empty: use PG*
        variables) - without its password: a command line is visible to every
        user in ``ps``. The password travels in ``env()``."""
        if not self.dsn:
            return []
        parts = conninfo_to_dict(self.dsn)
        if "password" not in parts:
            return [self.dsn]
        parts.pop("password")
        return [make_conninfo("", **parts)] if parts else []

    def env(self, *, own: bool = False) -> dict[str, str]:
        """What a client tool of this connection adds to its host's environment
        (an executor adds it, on this machine or another): PGPASSWORD when the
        connection string carries a password, kept off the command line;
        ``own``: a tool of pgrig's own (a load, a setup), with ``own``'s options
        in PGOPTIONS after this machine's."""
        env: dict[str, str] = {}
        password = conninfo_to_dict(self.dsn).get("password") if self.dsn else None
        if password:
            env["PGPASSWORD"] = str(password)
        if own and self.own:
            env["PGOPTIONS"] = f"{os.environ.get('PGOPTIONS', '')} {self.own}".strip()
        return env

    def describe(self) -> str:
        """For messages and reports: the connection without its password."""
        try:
            parts = conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError:
            return "<invalid connection string>"
        parts.pop("password", None)
        return " ".join(f"{k}={v}" for k, v in parts.items()) or "(PG* environment)"

    def answers(self) -> Conn:
        """This connection, once the server answered: a server the user named
        (``--dsn`` or the PG* variables) that does not is bad input (exit 2)."""
        try:
            self.connect().close()
        except ClusterError as exc:
            said = f"--dsn: {exc.message}" if self.dsn else f"the PG* environment: {exc.__cause__}"
            raise UsageError(
                said.strip(),
                hint=refused_hint(said, "the dsn" if self.dsn else "the PG* variables"),
            ) from exc
        return self

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection:
        # UTF8 on the wire: a SQL_ASCII database (seed 000's initdb -E SQL_ASCII)
        # would otherwise hand psycopg bytes instead of text.
        info = make_conninfo(self.conninfo(), client_encoding="UTF8")
        try:
            return psycopg.connect(info, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            raise ClusterError(
                f"cannot connect to {self.describe()}: {libpq_reason(exc)}",
                hint="check --dsn or the PG* environment variables (PGHOST, PGPORT, PGUSER, ...)",
            ) from exc
