"""Settings the server parses but cannot start with, refused before initdb.

``postgres -C`` (profiles.check_values) reads a configuration without a data
directory and stops at values it cannot parse; what the postmaster checks
later - the shared memory it maps, the files and libraries it opens, the log
directory its collector writes - it cannot see. A real trial start needs a
data directory: ``initdb -N`` took 1.4 s here, and a fake one is refused
before any of these checks (the postmaster reads ``global/pg_control``
first). So each is checked here, from the settings, the machine and the
server's OS user; what still fails at the start quotes the server's log in
its error (``cluster.server``). Each of these made a study, then exit 1 with
a hint naming a server.log already removed (issue 33).
"""

from __future__ import annotations

import functools
import os
import resource
from pathlib import Path

from pgrig import files, proc
from pgrig.cluster.profiles import Machine, Profile
from pgrig.errors import MemoryShortfall, UsageError
from pgrig.hosts.local import HERE
from pgrig.pgsource.binaries import PgBinaries
from pgrig.units import parse_size, size_text

_ON = ("on", "true", "yes", "1")
# PostgreSQL's unit when shared_buffers or wal_buffers is a bare number: 8 kB pages.
_PAGE = 8192


def check(
    profile: Profile, bins: PgBinaries, os_user: proc.OsUser | None, machine: Machine
) -> None:
    """Refuse what the server would not start with, naming the setting, where it
    was written and the fix. ``machine``: where the server runs (its RAM)."""
    _memory(profile, machine)
    _wal_level(profile, bins)
    for key in ("hba_file", "ident_file"):
        _readable(profile, key, os_user)
    _libraries(profile, bins)
    _log_directory(profile, os_user)
    _huge_pages(profile)
    _socket_directory(os_user)


# PostgreSQL keeps max_stack_depth this far below the stack's rlimit (STACK_DEPTH_SLOP)
# and refuses a max_stack_depth under 100 kB: a stack rlimit under 612 kB and no start.
STACK_SLOP = 512 * 1024
_STACK_MIN = 100 * 1024
# Beside its shared memory a postmaster maps its binary, libraries and heaps:
# it started here (PostgreSQL 15) under an address-space limit of shared memory
# + 73 MB (shared_buffers 128MB) and + 112 MB (1GB), and then each backend needs
# room for its work_mem and the load's maintenance_work_mem.
_AS_REST = 64 * 2**20  # the rest of the shared memory (locks, WAL buffers): a margin
_AS_OWN = 256 * 2**20


def rlimits(profile: Profile) -> None:
    """The server inherits pgrig's resource limits: a stack rlimit (``ulimit -s``)
    too small for max_stack_depth failed ``postgres -C`` and was blamed on the
    profile; an address-space rlimit (``ulimit -v``) smaller than the shared
    memory made a study, then "could not map anonymous shared memory" (issue
    40.4). Checked before the profile's values, since those fail under it."""
    _stack_rlimit(profile)
    _address_space_rlimit(profile)


def _soft(which: int) -> int | None:
    soft, _ = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else soft


def _stack_rlimit(profile: Profile) -> None:
    limit = _soft(resource.RLIMIT_STACK)
    if limit is None:
        return
    text = value(profile, "max_stack_depth")
    if text and text.isdigit():
        asked: int | None = int(text) * 1024  # a bare max_stack_depth is in kB, not pages
    else:
        asked = _bytes(text) if text else None
    # Unset, the server takes min(2MB, the rlimit - 512 kB): only PostgreSQL's minimum must fit.
    depth = asked if asked is not None else _STACK_MIN
    need = depth + STACK_SLOP
    if limit >= need:
        return
    said = (
        f"max_stack_depth = {text} ({profile.origin('max_stack_depth')})"
        if asked is not None
        else "max_stack_depth at least 100kB (PostgreSQL's minimum)"
    )
    least = -(-need // 1024)
    raise UsageError(
        f"ulimit -s (RLIMIT_STACK) is {limit // 1024} kB: the server needs {said} and 512 kB "
        'more below it: it would not start (invalid value for parameter "max_stack_depth")',
        hint=(
            f"ulimit -s 8192 (the usual default; at least {least})"
            if least <= 8192
            else f"ulimit -s {least}"
        )
        + " in the shell that runs pgrig"
        + (", or a lower max_stack_depth (--set max_stack_depth=...)" if asked else ""),
    )


def _address_space_rlimit(profile: Profile) -> None:
    limit = _soft(resource.RLIMIT_AS)
    if limit is None:
        return
    text = value(profile, "shared_buffers") or "128MB"
    shared = _bytes(text) or 128 * 2**20
    need = shared + _AS_REST + _AS_OWN
    if limit >= need:
        return
    fits = max(0, limit - _AS_REST - _AS_OWN)
    lower = f", or shared_buffers = {fits // 2**20}MB or less" if fits >= 16 * 2**20 else ""
    raise MemoryShortfall(
        f"ulimit -v (RLIMIT_AS) is {limit // 1024} kB ({size_text(limit)}): the server maps "
        f"its shared memory whole at its start - shared_buffers = {text} "
        f"({profile.origin('shared_buffers')}) and the rest - and needs about "
        f"{size_text(need)} of address space with its own: it would not start (could not "
        "map anonymous shared memory)",
        hint=f"ulimit -v unlimited (or at least {-(-need // 1024)}) in the shell that runs "
        f"pgrig{lower}" + (" (--set shared_buffers=...)" if lower else ""),
    )


def value(profile: Profile, key: str) -> str | None:
    """A setting as the server reads it: without the quotes of the file."""
    raw = profile.settings.get(key)
    if raw is None:
        return None
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    return text


def _bytes(text: str) -> int | None:
    if text.isdigit():
        return int(text) * _PAGE
    try:
        return parse_size(text)
    except UsageError:
        return None  # -1 (wal_buffers' auto) or what postgres -C already refused


def _memory(profile: Profile, machine: Machine) -> None:
    """Shared memory is mapped whole at the start: more than the machine's RAM
    failed with 'could not map anonymous shared memory'. Memory the study cannot
    have: exit 5, as targets whose buffers together pass the RAM."""
    text = value(profile, "shared_buffers")
    shared = _bytes(text) if text else None
    if shared is None or shared <= machine.ram_bytes:
        return
    where = profile.origin("shared_buffers")
    raise MemoryShortfall(
        f"{where}: shared_buffers = {text} is more than the server's "
        f"{size_text(machine.ram_bytes)} of memory (this machine's RAM, or the target's "
        "memory limit): it would not start (could not map its shared memory)",
        hint=f"shared_buffers = {_quarter(machine.ram_bytes)} (a quarter of RAM) or less",
    )


def _wal_level(profile: Profile, bins: PgBinaries) -> None:
    """wal_level = minimal writes no WAL for a replica or an archive: the server
    refuses it beside WAL senders (10 by default from PostgreSQL 10) or
    archive_mode, at its start."""
    if (value(profile, "wal_level") or "").lower() != "minimal":
        return
    senders = value(profile, "max_wal_senders") or ("10" if bins.version_num >= 100000 else "0")
    archive = (value(profile, "archive_mode") or "off").lower()
    if senders.isdigit() and int(senders) > 0:
        said, fix = f"max_wal_senders = {senders}", "max_wal_senders = 0"
    elif archive in (*_ON, "always"):
        said, fix = f"archive_mode = {archive}", "archive_mode = off"
    else:
        return
    raise UsageError(
        f"{profile.origin('wal_level')}: wal_level = minimal with {said}: the server "
        "would not start (minimal writes no WAL for replicas or archives)",
        hint=f"add {fix} beside it (as profile seed002 does), or wal_level = replica",
    )


def _quarter(ram: int) -> str:
    return f"{max(1, ram // 4 // 2**20)}MB"


def _readable(profile: Profile, key: str, os_user: proc.OsUser | None) -> None:
    """A configuration file the server reads at its start (pg_hba.conf: it stops
    without it; pg_ident.conf: its user maps are lost)."""
    text = value(profile, key)
    if not text or not os.path.isabs(text):
        return  # relative: the data directory's, made by initdb
    path = Path(text)
    where = profile.origin(key)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(
            f"{where}: {key} = '{text}': {path} {what}: the server reads it at its start",
            hint=f"give an existing file, or drop {key} (initdb writes its own)",
        )
    blocked = files.blocked_for(path.parent, os_user)
    if blocked is not None or not files.permits(path, os_user, os.R_OK):
        who = os_user.name if os_user is not None else "the server's OS user"
        raise UsageError(
            f"{where}: {key} = '{text}': {who} cannot read it"
            + (f" ({blocked} is not searchable for it)" if blocked is not None else ""),
            hint=f"chmod o+r {path} (and o+x on its directories), or another {key}",
        )


@functools.cache
def pkglibdir(bin_dir: Path) -> Path | None:
    """Where the build's modules are (``$libdir``): ``pg_config --pkglibdir``,
    else the lib directory beside ``bin``; None when neither is known."""
    pg_config = bin_dir / "pg_config"
    if pg_config.is_file():
        done = HERE.run([str(pg_config), "--pkglibdir"], timeout=30, check=False, what="pg_config")
        found = Path(done.stdout.strip())
        if done.ok and found.is_dir():
            return found
    for candidate in (bin_dir.parent / "lib" / "postgresql", bin_dir.parent / "lib"):
        if (candidate / "plpgsql.so").is_file():
            return candidate
    return None


def _libraries(profile: Profile, bins: PgBinaries) -> None:
    """Libraries the server loads at its start (or at each connection): one
    missing stopped the start with 'could not access file'."""
    if (value(profile, "dynamic_library_path") or "$libdir") != "$libdir":
        return  # searched where the user said: the server's business
    libdir = pkglibdir(Path(bins.bin_dir))
    if libdir is None:
        return
    for key in ("shared_preload_libraries", "session_preload_libraries", "local_preload_libraries"):
        for name in (n.strip().strip('"') for n in (value(profile, key) or "").split(",")):
            if not name or _found(name, libdir):
                continue
            where = profile.origin(key)
            raise UsageError(
                f"{where}: {key} = '{value(profile, key)}': PostgreSQL {bins.version} has no "
                f"library {name!r} (not in {libdir})",
                hint=f"install the extension's package for PostgreSQL {bins.major}, or "
                f"drop {name} from {key}; `ls {libdir}` lists what there is",
            )


def _found(name: str, libdir: Path) -> bool:
    if "/" in name:
        path = Path(name.replace("$libdir", str(libdir)))
        return path.is_file() or path.with_name(path.name + ".so").is_file()
    return (libdir / name).is_file() or (libdir / f"{name}.so").is_file()


def _log_directory(profile: Profile, os_user: proc.OsUser | None) -> None:
    """The log collector's directory: the server makes it (one level, as its
    user) and writes there, or stops at its start."""
    if (value(profile, "logging_collector") or "off").lower() not in _ON:
        return
    text = value(profile, "log_directory")
    if not text or not os.path.isabs(text):
        return  # in the data directory
    path = Path(text)
    where = profile.origin("log_directory")
    need = path if path.is_dir() else path.parent
    who = os_user.name if os_user is not None else "the server's OS user"
    if not need.is_dir():
        raise UsageError(
            f"{where}: log_directory = '{text}': {need} does not exist (the server makes "
            "only the last directory)",
            hint=f"mkdir -p {need}, or a log_directory inside the data directory (e.g. 'log')",
        )
    blocked = files.blocked_for(need, os_user)
    if blocked is not None or not files.permits(need, os_user, os.W_OK | os.X_OK):
        raise UsageError(
            f"{where}: log_directory = '{text}': {who} "
            + (f"cannot pass {blocked}" if blocked is not None else f"cannot write in {need}"),
            hint=f"a directory {who} owns, or a relative log_directory (e.g. 'log'), which "
            "goes in the data directory",
        )


def _meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    """/proc/meminfo's counts (kB figures in bytes); {} where it cannot be read."""
    out: dict[str, int] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            out[name] = int(words[0]) * (1024 if words[1:] == ["kB"] else 1)
    return out


def _huge_pages(profile: Profile, meminfo: dict[str, int] | None = None) -> None:
    """huge_pages = on maps the shared memory into huge pages reserved beforehand
    (vm.nr_hugepages), or the server does not start: "could not map anonymous
    shared memory" after a study was created (issue 40.4)."""
    if (value(profile, "huge_pages") or "try").lower() != "on":
        return
    info = _meminfo() if meminfo is None else meminfo
    size, free = info.get("Hugepagesize"), info.get("HugePages_Free")
    if not size or free is None:
        return  # not Linux's /proc: the server's start says it
    text = value(profile, "shared_buffers") or "128MB"
    shared = _bytes(text) or 128 * 2**20
    # the rest of the shared memory (locks, WAL buffers, ...): a margin, not a count
    need = shared + 64 * 2**20
    if free * size >= need:
        return
    pages = -(-need // size)
    raise UsageError(
        f"{profile.origin('huge_pages')}: huge_pages = on, but this machine has {free} huge "
        f"pages of {size_text(size)} free (HugePages_Free in /proc/meminfo) for shared memory "
        f"of more than shared_buffers = {text}: the server would not start",
        hint=f"huge_pages = try (uses them when there are), or reserve them first: "
        f"sysctl vm.nr_hugepages={pages}",
    )


# A unix socket's path holds at most 107 bytes (sun_path); the server's is
# SOCKET_DIR/.s.PGSQL.PORT, SOCKET_DIR a pgrig-sock-XXXXXXXX in the temporary directory.
SOCKET_PATH_MAX = 107
_SOCKET_TAIL = len("/pgrig-sock-XXXXXXXX/.s.PGSQL.65535")


def _socket_directory(os_user: proc.OsUser | None) -> None:
    """The server's socket goes in a directory made under TMPDIR (workdir.make_socket_dir):
    one too deep made a server that could not make its socket ("Unix-domain socket
    path ... is too long"), blamed on the profile after a study was created."""
    tmp = str(files.temp_dir_for(os_user))
    where = f"TMPDIR={os.environ['TMPDIR']}" if os.environ.get("TMPDIR") else tmp
    length = len(os.fsencode(tmp)) + _SOCKET_TAIL
    if length > SOCKET_PATH_MAX:
        raise UsageError(
            f"{where}: the server's socket there ({tmp}/pgrig-sock-XXXXXXXX/.s.PGSQL.PORT) "
            f"would be {length} bytes long, over the {SOCKET_PATH_MAX} a unix socket's path "
            "may have",
            hint=f"point TMPDIR at a directory of at most {SOCKET_PATH_MAX - _SOCKET_TAIL} "
            "characters (unset, it is /tmp)",
        )
