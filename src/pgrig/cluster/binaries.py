"""Finding the PostgreSQL binaries: ``--pg-bin``, else ``pg_config --bindir``, else the
newest ``/usr/lib/postgresql/*/bin``. Checked before anything is created."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pgrig import proc
from pgrig.errors import BinaryNotFound, ToolError

SERVER_TOOLS = ("initdb", "pg_ctl", "postgres", "pgbench")
CLIENT_TOOLS = ("pgbench",)
DEBIAN_ROOT = Path("/usr/lib/postgresql")
INSTALL_HINT = "install PostgreSQL (Debian: apt-get install postgresql postgresql-contrib)"
PG_BIN_HINT = (
    "point --pg-bin (campaign: pg_bin in [[target]]) at a PostgreSQL bin directory "
    "(Debian: apt-get install postgresql-15 puts one in /usr/lib/postgresql/15/bin)"
)


@dataclass(frozen=True)
class PgBinaries:
    bin_dir: Path
    version: str  # e.g. "15.18"
    major: int

    def path(self, tool: str) -> Path:
        return self.bin_dir / tool

    def has(self, tool: str) -> bool:
        candidate = self.bin_dir / tool
        return candidate.is_file() and candidate.stat().st_mode & 0o111 != 0


def tool_path(bin_dir: Path | str, tool: str) -> Path:
    """``<bin_dir>/<tool>``, or BinaryNotFound naming both and the option that fixes it."""
    bin_dir = Path(bin_dir)
    if not bin_dir.is_dir():
        raise BinaryNotFound(f"{tool}: {bin_dir} is not a directory", hint=PG_BIN_HINT)
    binary = bin_dir / tool
    if not binary.is_file():
        raise BinaryNotFound(f"{tool} not found in {bin_dir}", hint=PG_BIN_HINT)
    if not binary.stat().st_mode & 0o111:
        raise BinaryNotFound(
            f"{binary} is not executable", hint=f"chmod +x {binary}, or {PG_BIN_HINT}"
        )
    return binary


def _version_of(bin_dir: Path, tool: str) -> tuple[str, int]:
    try:
        out = proc.run([bin_dir / tool, "--version"], timeout=20).stdout
    except ToolError as exc:
        raise BinaryNotFound(f"{bin_dir / tool} does not run: {exc}", hint=INSTALL_HINT) from exc
    match = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?", out)
    if not match:
        raise BinaryNotFound(f"{bin_dir / tool} --version printed no PostgreSQL version: {out!r}")
    return match.group(0).split()[-1], int(match.group(1))


def _check(bin_dir: Path, tools: Iterable[str], origin: str) -> PgBinaries:
    if not bin_dir.is_dir():
        raise BinaryNotFound(
            f"{origin} {bin_dir} is not a directory",
            hint="point --pg-bin (campaign: pg_bin in [[target]]) at the directory holding "
            "initdb, pg_ctl and pgbench "
            "(e.g. /usr/lib/postgresql/15/bin)",
        )
    missing = [t for t in tools if not (bin_dir / t).is_file()]
    if missing:
        raise BinaryNotFound(
            f"{origin} {bin_dir} holds no {', '.join(missing)}",
            hint="point --pg-bin (campaign: pg_bin in [[target]]) at the directory holding "
            "initdb, pg_ctl and pgbench "
            f"(e.g. /usr/lib/postgresql/15/bin), or {INSTALL_HINT}",
        )
    probe = next(iter(tools), "pgbench")
    version, major = _version_of(bin_dir, probe)
    return PgBinaries(bin_dir=bin_dir, version=version, major=major)


def _debian_bin_dirs(root: Path) -> list[Path]:
    def major(p: Path) -> float:
        try:
            return float(p.parent.name)
        except ValueError:
            return -1.0

    return sorted((p for p in root.glob("*/bin") if p.is_dir()), key=major, reverse=True)


def find(
    pg_bin: str | Path | None = None,
    *,
    tools: Iterable[str] = SERVER_TOOLS,
    debian_root: Path = DEBIAN_ROOT,
) -> PgBinaries:
    """The binaries to use. ``tools`` are the ones that must be there."""
    tools = tuple(tools)
    if pg_bin is not None:
        return _check(Path(pg_bin), tools, "--pg-bin")
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = Path(proc.run([pg_config, "--bindir"], timeout=20).stdout.strip())
            if all((bindir / t).is_file() for t in tools):
                return _check(bindir, tools, "pg_config --bindir")
        except ToolError:
            pass
    for candidate in _debian_bin_dirs(debian_root):
        if all((candidate / t).is_file() for t in tools):
            return _check(candidate, tools, "found")
    raise BinaryNotFound(
        f"no PostgreSQL binaries with {', '.join(tools)} found "
        f"(looked at pg_config --bindir and {debian_root}/*/bin)",
        hint=f"pass --pg-bin DIR, or {INSTALL_HINT}",
    )
