"""PostgreSQL installed by the system's packages: Debian's /usr/lib/postgresql/*/bin,
and whatever ``pg_config --bindir`` names (another distribution's layout)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pgrig.errors import ToolError
from pgrig.hosts.local import HERE
from pgrig.pgsource.model import CLIENT_TOOLS, Installed

DEBIAN_ROOT = Path("/usr/lib/postgresql")
_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+(?:\.\d+){0,2})")


def version_of(binary: Path) -> str | None:
    """``X --version`` -> "15.18"; None when it does not run."""
    try:
        out = HERE.run([str(binary), "--version"], timeout=20).stdout
    except ToolError:
        return None
    m = _VERSION.search(out)
    return m.group(1) if m else None


def _candidates(root: Path) -> list[Path]:
    found = [p for p in sorted(root.glob("*/bin")) if p.is_dir()]
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = Path(HERE.run([pg_config, "--bindir"], timeout=20).stdout.strip())
        except ToolError:
            bindir = None
        if bindir and bindir.is_dir() and bindir.resolve() not in {p.resolve() for p in found}:
            found.append(bindir)
    return found


def installed(root: Path = DEBIAN_ROOT) -> list[Installed]:
    out = []
    for bin_dir in _candidates(root):
        tools = ("postgres", *CLIENT_TOOLS)
        probe = next((bin_dir / t for t in tools if (bin_dir / t).is_file()), None)
        version = version_of(probe) if probe else None
        if version is None:
            continue
        out.append(
            Installed(
                version=version,
                where="system",
                bin_dir=bin_dir,
                source="debian" if bin_dir.is_relative_to(root) else "pg_config",
                complete=all((bin_dir / t).is_file() for t in CLIENT_TOOLS),
                server=(bin_dir / "postgres").is_file(),
            )
        )
    return out
