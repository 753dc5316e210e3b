"""Configuration profiles: named postgresql.conf fragments sized to the machine.

A profile is a plain file (``profiles/*.conf`` in the package, or any path the
user gives). Values may contain ``{ram * F}`` (MB) and ``{cpus * F}``; see the
header of ``profiles/oltp.conf``. ``{min(32GB, ram * 0.25)}`` keeps a seed's own
value where this machine can hold it and scales it where it cannot; every value
scaled so is named in ``Profile.scaled``, shown before the run and written into
the cluster's pgrig.conf. Keys are checked against the server binary's
own list of parameters (``postgres --describe-config``) before anything starts.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from importlib import resources
from pathlib import Path

from pgrig import files, proc
from pgrig.cluster import compat
from pgrig.errors import UsageError
from pgrig.hosts.executor import C_LOCALE, Launch
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.schema import Table, type_name
from pgrig.units import format_bytes

# Settings pgrig sets on every server it makes, and why: a value given for one
# was silently overridden while the report claimed it (a campaign's
# set = { port = 5433 }), or broke pgrig's own connections (hba_file).
OWNED = {
    "port": "pgrig gives each server it makes a free port of its own",
    "listen_addresses": "pgrig's server listens on its private socket only, or on 127.0.0.1 "
    'with listen = "tcp" in the target',
    "unix_socket_directories": "pgrig's clients reach the server in its private socket directory",
    "unix_socket_directory": "pgrig's clients reach the server in its private socket directory",
    "unix_socket_permissions": "pgrig keeps the server's socket private to its OS user (0700)",
    "data_directory": "pgrig makes the data directory (the target's directory says where)",
    "config_file": "pgrig writes the server's configuration files itself",
    "hba_file": "pgrig's own connections are let in by the pg_hba.conf it writes into the "
    "data directory",
}
RESERVED = frozenset(OWNED)


def setting_name(name: str, where: str | Callable[[], str]) -> str:
    """The one check of a setting's name, wherever it is given (a profile line,
    ``--set``, a campaign's ``set`` or ``axes``): PostgreSQL's names are
    case-insensitive, so the lower-case one (``Shared_Buffers`` was dropped as a
    parameter no PostgreSQL 15 knows while the report claimed it), refused when
    pgrig sets it itself, with why. ``where`` names the place for the error (or
    finds it, asked only then: a campaign's line)."""
    key = name.strip().lower()
    if key in OWNED:
        place = where if isinstance(where, str) else where()
        raise UsageError(
            f"{place}: {key} is set by pgrig and cannot be set here: {OWNED[key]}",
            hint=f"remove {key}; pgrig sets {', '.join(sorted(OWNED))} itself",
        )
    return key


_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*(.*?)\s*$")
_EXPR = re.compile(r"\{\s*(ram|cpus)\s*(?:\*\s*([0-9]*\.?[0-9]+)\s*)?\}")
_FIT = re.compile(
    r"\{\s*min\(\s*([0-9]+(?:\.[0-9]+)?)\s*([kMGT]B)?\s*,\s*(ram|cpus)\s*"
    r"(?:\*\s*([0-9]*\.?[0-9]+)\s*)?\)\s*\}"
)
_UNIT = {"": 1, "kB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}


@dataclass(frozen=True)
class Machine:
    """What a profile may be sized to."""

    ram_bytes: int
    cpus: int

    @classmethod
    def this(cls) -> Machine:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return cls(ram_bytes=ram, cpus=os.cpu_count() or 1)

    @classmethod
    def within(cls, memory_bytes: int | None, cpus: int | None = None) -> Machine:
        """This machine, or what a memory cgroup of ``memory_bytes`` and a cpuset of
        ``cpus`` leave the server: {ram * 0.25} of a profile means a quarter of
        what it may use, {cpus} the CPUs it may run on."""
        this = cls.this()
        return cls(memory_bytes or this.ram_bytes, cpus or this.cpus)


@dataclass(frozen=True)
class Profile:
    name: str
    source: str  # where it was read from
    settings: dict[str, str] = field(default_factory=dict)
    # "shared_buffers 32GB -> 6144MB (ram * 0.25 of 24 GiB)": a {min(...)} that
    # chose the machine's side; a --set of the same name drops its line.
    scaled: tuple[str, ...] = ()
    # Where each override came from ("--set", "c.toml: target t set"): an error
    # about a value names the place to fix it, not the profile it was laid over.
    origins: dict[str, str] = field(default_factory=dict)

    def with_overrides(self, overrides: dict[str, str], source: str = "--set") -> Profile:
        scaled = tuple(s for s in self.scaled if s.split(" ", 1)[0] not in overrides)
        origins = {**self.origins, **dict.fromkeys(overrides, source)}
        return Profile(self.name, self.source, {**self.settings, **overrides}, scaled, origins)

    def origin(self, name: str) -> str:
        """Where the value of ``name`` was written: an override's place, else the
        profile - or, for a setting the profile leaves alone, the environment
        variable the server reads it from (PGCLIENTENCODING=junk blamed "profile oltp")."""
        if name in self.origins or name in self.settings:
            return self.origins.get(name, self.source)
        variable = _SERVER_READS.get(name.lower())
        if variable is not None and variable in os.environ:
            return f"{variable}={os.environ[variable]} in the environment, read by the server"
        return self.source


# The settings the server takes from its environment when no file sets them.
_SERVER_READS = {"client_encoding": "PGCLIENTENCODING", "datestyle": "PGDATESTYLE"}


def available() -> list[str]:
    return sorted(
        p.name.removesuffix(".conf")
        for p in resources.files("pgrig.profiles").iterdir()
        if p.name.endswith(".conf")
    )


def _strip_comment(value: str) -> str:
    out, quoted = [], False
    for ch in value:
        if ch == "'":
            quoted = not quoted
        if ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


def _machine_value(what: str, factor: float, machine: Machine) -> int:
    """``ram * F`` in MB, ``cpus * F`` rounded; at least 1."""
    if what == "ram":
        return max(1, int(machine.ram_bytes * factor / 2**20))
    return max(1, round(machine.cpus * factor))


def _fit(m: re.Match[str], machine: Machine, name: str, scaled: list[str]) -> str:
    number, unit, what, factor = m.group(1), m.group(2), m.group(3), float(m.group(4) or 1)
    mine = _machine_value(what, factor, machine)
    written = f"{number}{unit or ''}"
    if what == "ram" and unit:
        seed_mb = float(number) * _UNIT[unit] / 2**20
        if seed_mb <= mine:
            return written
        of = f"{format_bytes(machine.ram_bytes)} RAM"
        scaled.append(f"{name} {written} -> {mine}MB (ram * {factor:g} of {of})")
        return f"{mine}MB"
    if float(number) <= mine:
        return written
    # a count sized by memory (max_connections: shared memory per slot): F per MB
    of = (
        f"per MB of {format_bytes(machine.ram_bytes)} RAM"
        if what == "ram"
        else (f"of {machine.cpus} CPUs")
    )
    scaled.append(f"{name} {written} -> {mine} ({what} * {factor:g} {of})")
    return str(mine)


def _expand(
    value: str, machine: Machine, where: str, name: str = "", scaled: list[str] | None = None
) -> str:
    value = _FIT.sub(lambda m: _fit(m, machine, name, scaled if scaled is not None else []), value)

    def repl(m: re.Match[str]) -> str:
        return str(_machine_value(m.group(1), float(m.group(2) or 1), machine)) + (
            "MB" if m.group(1) == "ram" else ""
        )

    expanded = _EXPR.sub(repl, value)
    if "{" in expanded.replace("'{", ""):
        raise UsageError(
            f"{where}: cannot understand the expression in {value!r}",
            hint="use {ram * 0.25} (MB of RAM), {cpus * 2} (logical CPUs) or "
            "{min(32GB, ram * 0.25)} (the value, or the machine's share where it is smaller)",
        )
    return expanded


def settings_of(t: Table, key: str, table: Table | None) -> dict[str, str]:
    """A campaign's table of settings (a target's ``set``, a workload's, declared
    with ``kind=Table``): each name through ``setting_name``, each value as
    postgresql.conf reads it."""
    settings: dict[str, str] = {}
    if table is None:
        return settings
    for given, value in table.data.items():
        name = setting_name(given, partial(table.where, given))
        if name in settings:
            raise table.error(
                given,
                f"{name} is given twice (PostgreSQL's names ignore case)",
                hint="keep one of them",
            )
        if isinstance(value, bool):
            settings[name] = "on" if value else "off"
        elif isinstance(value, int | float | str):
            settings[name] = str(value)
        else:
            raise table.error(given, f"expected a value, got {type_name(type(value))}")
        if any(ch in settings[name] for ch in "\n\r\0"):  # it read "profile oltp: syntax error"
            raise t.error(
                key,
                f"{name}={settings[name]!r}: a line break in a value (postgresql.conf holds"
                " one setting a line)",
                hint="give each setting on its own: --set a=1 --set b=2 (in a campaign:"
                " set = { a = 1, b = 2 })",
            )
    return settings


def parse(text: str, *, name: str, source: str, machine: Machine) -> Profile:
    settings: dict[str, str] = {}
    scaled: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m or not _strip_comment(m.group(2)):
            raise UsageError(
                f"{source}:{number}: expected 'name = value', got {raw.strip()!r}",
                hint="profiles use postgresql.conf syntax, one setting per line",
            )
        key = m.group(1).lower()
        if key in ("include", "include_if_exists", "include_dir"):  # "unknown parameter"
            raise UsageError(
                f"{source}:{number}: {key} is not followed in a profile: a profile is one file,"
                " recorded whole with every study",
                hint=f"copy the settings of {_strip_comment(m.group(2))} into {source}",
            )
        key = setting_name(key, f"{source}:{number}")
        settings[key] = _expand(
            _strip_comment(m.group(2)), machine, f"{source}:{number}", key, scaled
        )
    return Profile(name=name, source=source, settings=settings, scaled=tuple(scaled))


def load(name_or_path: str, *, machine: Machine | None = None) -> Profile:
    """A shipped profile by name (``stock``, ``oltp``) or a profile file by path."""
    machine = machine or Machine.this()
    path = Path(name_or_path)
    if path.suffix == ".conf" or os.sep in name_or_path or path.is_dir():
        if (what := files.not_a_file(path)) is not None:
            raise UsageError(
                f"profile file {path} {what}",
                hint=f"give a path to a .conf file or one of: {', '.join(available())}",
            )
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:  # it was a traceback in `pgrig plan`
            line = path.read_bytes()[: exc.start].count(b"\n") + 1
            raise UsageError(
                f"profile file {path}:{line}: byte {exc.object[exc.start]:#04x} is not UTF-8",
                hint="save the file as UTF-8 (postgresql.conf's settings are ASCII)",
            ) from None
        except OSError as exc:
            raise UsageError(f"profile file {path} cannot be read: {exc.strerror}") from None
        return parse(text, name=path.stem, source=str(path), machine=machine)
    resource = resources.files("pgrig.profiles") / f"{name_or_path}.conf"
    if not resource.is_file():
        close = difflib.get_close_matches(name_or_path, available(), n=1)
        suggestion = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown profile {name_or_path!r}",
            hint=f"{suggestion}available: {', '.join(available())}, or a path to a .conf file",
        )
    return parse(
        resource.read_text(), name=name_or_path, source=f"profile {name_or_path}", machine=machine
    )


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``--set name=value`` options."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--set {item!r}: expected name=value", hint="e.g. --set shared_buffers=2GB"
            )
        key = setting_name(key, f"--set {item}")
        out[key] = value.strip()
    return out


def known_parameters(bins: PgBinaries) -> set[str]:
    out = HERE.run(
        [str(bins.path("postgres")), "--describe-config"], timeout=30, env=C_LOCALE
    ).stdout
    return {line.split("\t", 1)[0] for line in out.splitlines() if line.strip()}


def _scratch_postgres(
    bins: PgBinaries, conf: str, os_user: proc.OsUser | None, *args: str
) -> proc.Completed | None:
    """``postgres -D SCRATCH ARGS`` on a directory holding only ``conf`` as
    postgresql.conf: the server's own parser, no cluster. None when it cannot run
    (as root with no server user: postgres refuses root)."""
    if os.geteuid() == 0 and os_user is None:
        return None
    scratch = Path(tempfile.mkdtemp(prefix="pgrig-check-conf-", dir=files.temp_dir_for(os_user)))
    try:
        (scratch / "postgresql.conf").write_text(conf)
        if os_user is not None:
            for path in (scratch, scratch / "postgresql.conf"):
                os.chown(path, os_user.uid, os_user.gid)
        return HERE.run(
            [str(bins.path("postgres")), "-D", str(scratch), *args],
            timeout=30,
            env=C_LOCALE,  # its errors are read (``_config_errors``)
            check=False,
            what="postgres -C",
            launch=Launch(os_user.name if os_user is not None else None),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def developer_parameters(
    bins: PgBinaries, names: Iterable[str], os_user: proc.OsUser | None
) -> set[str]:
    """Those of ``names`` this server knows although ``--describe-config`` hides
    them: developer options such as ``debug_io_direct`` (not in the sample file)."""
    found = set()
    for name in names:
        done = _scratch_postgres(bins, "", os_user, "-C", name)
        if done is not None and done.returncode == 0:
            found.add(name)
    return found


def adapt(
    profile: Profile,
    bins: PgBinaries,
    os_user: proc.OsUser | None = None,
    *,
    segment_mb: int | None = None,
) -> compat.Adapted:
    """The profile as this server's major needs it: renamed parameters and values
    translated, parameters the major lacks dropped with the reason (see compat);
    ``segment_mb`` is the cluster's WAL segment size where known."""
    known = known_parameters(bins)
    unknown = [
        n
        for n in profile.settings
        if n.lower() not in known and "." not in n and compat.span(n) is None
    ]
    if unknown:
        known |= developer_parameters(bins, unknown, os_user)
    return compat.adapt(
        profile.settings,
        known=known,
        version=bins.version,
        version_num=bins.version_num,
        where=profile.origin,
        segment_mb=segment_mb,
    )


def validate(
    profile: Profile,
    bins: PgBinaries,
    os_user: proc.OsUser | None = None,
    *,
    segment_mb: int | None = None,
) -> compat.Adapted:
    """Refuse, before initdb, parameters no PostgreSQL major knows (naming the
    nearest valid one) and values this server's own parser rejects; returns what
    ``adapt`` will change, for the user to see."""
    adapted = adapt(profile, bins, os_user, segment_mb=segment_mb)
    check_values(replace(profile, settings=dict(adapted.applied)), bins, os_user)
    return adapted


def check_values(profile: Profile, bins: PgBinaries, os_user: proc.OsUser | None) -> None:
    """``postgres -C`` reads a configuration file and stops at its first invalid
    value, with the server's own message (and the allowed values of an enum);
    it needs no cluster, only a directory holding that file."""
    _reserved_fit(profile)
    done = _scratch_postgres(bins, render(profile.settings), os_user, "-C", "server_version")
    if done is None:
        return  # postgres refuses to run as root; initdb will check them
    if done.returncode != 0:
        errors = _config_errors(done.stderr)
        named = re.findall(r'parameter "([^"]+)"', " ".join(errors))
        where = profile.origin(named[0]) if named else profile.source
        raise UsageError(
            f"{where}: {'; '.join(errors)} (PostgreSQL {bins.major})",
            hint=f"fix the value of {named[0]} ({where})"
            if where != profile.source
            else f"fix the value in {where}, or override it with --set NAME=VALUE "
            "(in a campaign: set = { NAME = VALUE } in the target)",
        )


# PostgreSQL's defaults for the connections kept back from max_connections
# (reserved_connections from 16 on).
_RESERVED = {"superuser_reserved_connections": 3, "reserved_connections": 0}


def _reserved_fit(profile: Profile) -> None:
    """The one start-time check ``postgres -C`` does not make: the reserved
    connections must leave room under max_connections (max_connections = 3 made
    a study, then a server that would not start)."""
    try:
        limit = int(profile.settings.get("max_connections", "100"))
        kept = {n: int(profile.settings.get(n, d)) for n, d in _RESERVED.items()}
    except ValueError:
        return  # not a number: postgres -C names it
    if sum(kept.values()) >= limit:
        said = " + ".join(f"{n} ({v})" for n, v in kept.items() if v)
        raise UsageError(
            f"{profile.origin('max_connections')}: max_connections ({limit}) must be more than "
            f"{said}: the server would not start",
            hint=f"max_connections = {sum(kept.values()) + 10} or more, or fewer reserved ones",
        )


def _config_errors(stderr: str) -> list[str]:
    """The server's complaints about a configuration file, each with its HINT."""
    found: list[str] = []
    for line in stderr.splitlines():
        level, _, message = line.partition(":  ")
        if level.endswith("HINT") and found:
            found[-1] += f" ({message.strip()})"
        elif any(word in message for word in ('parameter "', "unrecognized", "syntax")):
            found.append(message.strip())
    return found or [stderr.strip().splitlines()[-1] if stderr.strip() else "invalid settings"]


# Values postgresql.conf takes unquoted: an integer with its unit, a real (whose
# lexer token takes no unit: shared_buffers = 0.5GB was a syntax error, '0.5GB'
# is what the server accepts), a word. Anything else is quoted, which every
# parameter type accepts.
_PLAIN = re.compile(
    r"-?[0-9]+[A-Za-z]*|-?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*"
)


def render(settings: dict[str, str]) -> str:
    """A postgresql.conf fragment; values are quoted unless they are plain tokens."""
    lines = ["# Generated by pgrig - do not edit; it is rewritten at every start.", ""]
    for key, value in settings.items():
        if _PLAIN.fullmatch(value) or (
            value.startswith("'") and value.endswith("'") and len(value) >= 2
        ):
            rendered = value
        else:
            rendered = "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"
