"""Finding the PostgreSQL binaries: ``--pg-bin`` (a directory, or a version such as
``9.6`` installed by ``pgrig pg install``), else ``pg_config --bindir``, else the
newest ``/usr/lib/postgresql/*/bin``, else pgrig's cache. Checked before anything
is created.

A server-only build (the Maven packages pgrig installs) lacks pgbench, psql and
pg_isready. Those client tools then come from the newest PostgreSQL installed
(``client_dir``): newer clients speak to older servers, pgbench included.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pgrig.errors import BinaryNotFound, ToolError
from pgrig.hosts.local import HERE
from pgrig.pgsource import cache, system
from pgrig.pgsource.model import Spec, describe_majors, major_of, version_key
from pgrig.pgsource.model import version_num as server_version_num

SERVER_TOOLS = ("initdb", "pg_ctl", "postgres", "pgbench")
CLIENT_TOOLS = ("pgbench",)
# Tools that must come from the server's own installation: they read or write its
# data directory. Every other tool may come from a newer client installation.
SERVER_ONLY = frozenset(
    {"initdb", "pg_ctl", "postgres", "pg_controldata", "pg_resetwal", "pg_checksums"}
)
# pgrig's cluster code waits for a started server with pg_isready.
CLUSTER_CLIENT_TOOLS = ("pg_isready",)
DEBIAN_ROOT = Path("/usr/lib/postgresql")
INSTALL_HINT = "install PostgreSQL (Debian: apt-get install postgresql postgresql-contrib)"
_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_SPEC = re.compile(r"^\d+(\.\d+){0,2}$")


@dataclass(frozen=True)
class PgBinaries:
    bin_dir: Path
    version: str  # e.g. "15.18", "9.6.24"
    major: int  # 9 for 9.6 (see version_num to tell 9.5 from 9.6)
    # Where the tools missing from bin_dir (pgbench, psql, pg_isready) come from.
    client_dir: Path | None = None
    client_version: str | None = None
    # As ``server_version_num`` (90624 for 9.6.24, 180006 for 18.6): worked out
    # once, when the binaries are found, not at every look of their users.
    version_num: int = field(init=False)
    # The directory to run pgbench from: ``bin_dir`` unless the build lacks it.
    # Also worked out once: every load, warm-up and context asks for it.
    client_bin_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "client_bin_dir", self.tool_dir("pgbench"))
        object.__setattr__(self, "version_num", server_version_num(self.version))

    def path(self, tool: str) -> Path:
        own = self.bin_dir / tool
        if self.client_dir is None or tool in SERVER_ONLY or own.is_file():
            return own
        return self.client_dir / tool

    def has(self, tool: str) -> bool:
        candidate = self.path(tool)
        return candidate.is_file() and candidate.stat().st_mode & 0o111 != 0

    def tool_dir(self, tool: str) -> Path:
        """The directory to run ``tool`` from (for APIs that take a bin directory)."""
        return self.path(tool).parent


def tool_path(bin_dir: Path | str, tool: str) -> Path:
    """``<bin_dir>/<tool>`` on this machine, or BinaryNotFound naming both and the
    option that fixes it (``LocalExecutor.tool``)."""
    return Path(HERE.tool(bin_dir, tool))


def _version_of(bin_dir: Path, tool: str) -> tuple[str, int]:
    try:
        out = HERE.run([str(bin_dir / tool), "--version"], timeout=20).stdout
    except ToolError as exc:
        raise BinaryNotFound(f"{bin_dir / tool} does not run: {exc}", hint=INSTALL_HINT) from exc
    match = _VERSION.search(out)
    if not match:
        raise BinaryNotFound(f"{bin_dir / tool} --version printed no PostgreSQL version: {out!r}")
    return match.group(0).split()[-1], int(match.group(1))


def _client_candidates(debian_root: Path) -> list[Path]:
    """Every installation that may lend client tools: system packages and pgrig's cache."""
    found = [i.bin_dir for i in system.installed(debian_root)]
    found += [i.bin_dir for i in cache.installed() if i.complete]
    return found


def _client_dir(needed: tuple[str, ...], exclude: Path, debian_root: Path) -> tuple[Path, str]:
    """The newest installation holding every tool in ``needed``."""
    best: tuple[tuple[int, ...], Path, str] | None = None
    for candidate in _client_candidates(debian_root):
        if candidate.resolve() == exclude.resolve():
            continue
        if not all((candidate / t).is_file() for t in needed):
            continue
        try:
            version, _major = _version_of(candidate, needed[0])
        except BinaryNotFound:
            continue
        key = tuple(int(p) for p in re.findall(r"\d+", version))
        if best is None or key > best[0]:
            best = (key, candidate, version)
    if best is None:
        raise BinaryNotFound(
            f"{exclude} holds no {', '.join(needed)}, and no other PostgreSQL installed here "
            "has them",
            hint="install the client tools (Debian: apt-get install postgresql-client) or a "
            "complete build: pgrig pg install 18",
        )
    return best[1], best[2]


def _check(
    bin_dir: Path, tools: Iterable[str], origin: str, debian_root: Path = DEBIAN_ROOT
) -> PgBinaries:
    tools = tuple(tools)
    if not bin_dir.is_dir():
        raise BinaryNotFound(
            f"{origin} {bin_dir} is not a directory",
            hint="point --pg-bin (campaign: pg_bin in [[target]]) at the directory holding "
            "initdb, pg_ctl and pgbench (e.g. /usr/lib/postgresql/15/bin), or name an "
            "installed version (--pg-bin 9.6)",
        )
    server = [t for t in tools if t in SERVER_ONLY]
    missing = [t for t in server if not (bin_dir / t).is_file()]
    if missing:
        raise BinaryNotFound(
            f"{origin} {bin_dir} holds no {', '.join(missing)}",
            hint="point --pg-bin (campaign: pg_bin in [[target]]) at the directory holding "
            "initdb, pg_ctl and pgbench "
            f"(e.g. /usr/lib/postgresql/15/bin), or {INSTALL_HINT}",
        )
    clients = [t for t in tools if t not in SERVER_ONLY]
    if server:
        clients += [t for t in CLUSTER_CLIENT_TOOLS if t not in clients]
    lacking = tuple(t for t in clients if not (bin_dir / t).is_file())
    own = next((t for t in ("postgres", *tools) if (bin_dir / t).is_file()), None)
    client_dir = client_version = None
    if lacking:
        if own is None:  # nothing of PostgreSQL here at all
            raise BinaryNotFound(
                f"{origin} {bin_dir} holds no {', '.join(lacking)}",
                hint="point --pg-bin at the directory holding initdb, pg_ctl and pgbench "
                f"(e.g. /usr/lib/postgresql/15/bin), or {INSTALL_HINT}",
            )
        client_dir, client_version = _client_dir(lacking, bin_dir, debian_root)
    assert own is not None
    version, major = _version_of(bin_dir, own)
    return PgBinaries(
        bin_dir=bin_dir,
        version=version,
        major=major,
        client_dir=client_dir,
        client_version=client_version,
    )


def _debian_bin_dirs(root: Path) -> list[Path]:
    def major(p: Path) -> float:
        try:
            return float(p.parent.name)
        except ValueError:
            return -1.0

    return sorted((p for p in root.glob("*/bin") if p.is_dir()), key=major, reverse=True)


def looks_like_version(pg_bin: str | Path) -> bool:
    """``--pg-bin 9.6`` names an installed version, unless a directory of that name exists."""
    text = str(pg_bin)
    return bool(_SPEC.match(text)) and not Path(text).exists()


def find(
    pg_bin: str | Path | None = None,
    *,
    tools: Iterable[str] = SERVER_TOOLS,
    debian_root: Path = DEBIAN_ROOT,
) -> PgBinaries:
    """The binaries to use. ``tools`` are the ones that must be there (client tools
    may come from another installation, see ``PgBinaries.client_dir``)."""
    tools = tuple(tools)
    if pg_bin is not None:
        if looks_like_version(pg_bin):
            return resolve(str(pg_bin), tools=tools)
        return _check(Path(pg_bin), tools, "--pg-bin", debian_root)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = Path(HERE.run([pg_config, "--bindir"], timeout=20).stdout.strip())
            if all((bindir / t).is_file() for t in tools):
                return _check(bindir, tools, "pg_config --bindir", debian_root)
        except ToolError:
            pass
    for candidate in _debian_bin_dirs(debian_root):
        if all((candidate / t).is_file() for t in tools):
            return _check(candidate, tools, "found", debian_root)
    # No system installation: the newest in pgrig's cache, complete builds first.
    cached = sorted(
        cache.installed(),
        key=lambda i: (i.complete, [int(p) for p in re.findall(r"\d+", i.version)]),
        reverse=True,
    )
    for item in cached:
        try:
            return _check(item.bin_dir, tools, "cached", debian_root)
        except BinaryNotFound:
            continue
    raise BinaryNotFound(
        f"no PostgreSQL binaries with {', '.join(tools)} found "
        f"(looked at pg_config --bindir, {debian_root}/*/bin and pgrig's cache)",
        hint=f"pass --pg-bin DIR, or {INSTALL_HINT}, or pgrig pg install 18",
    )


def resolve(spec_text: str, *, tools: Iterable[str] = SERVER_TOOLS) -> PgBinaries:
    """The binaries of the newest installed release matching ``spec_text`` ("9.6",
    "18", "9.6.24"); server-only builds get their client tools from the newest
    PostgreSQL installed. Never downloads: a benchmark run must not depend on the
    network (``pgsource.catalog.install`` does)."""
    spec = Spec.parse(spec_text)
    here = system.installed() + cache.installed()
    found = [i for i in here if i.server and spec.matches(i.version)]
    if not found:
        majors = describe_majors([i.version for i in here if i.server])
        raise BinaryNotFound(
            f"PostgreSQL {spec.text} is not installed (installed majors: {majors})",
            hint=f"pgrig pg install {spec.text}",
        )
    best = max(found, key=lambda i: (version_key(i.version), i.complete, i.where == "system"))
    if os.geteuid() == 0 and not cache.others_can_enter(best.bin_dir):
        raise BinaryNotFound(
            f"{best.bin_dir} cannot be reached by the unprivileged user the server runs as",
            hint="set PGRIG_CACHE to a directory every user may enter (e.g. /var/cache/pgrig) "
            f"and run pgrig pg install {major_of(best.version)} again",
        )
    return find(best.bin_dir, tools=tools)
