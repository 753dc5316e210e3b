"""PostgreSQL version numbers, one reading for every layer: the sources and the
cache sort releases by them, the cluster's compatibility table looks majors up
by ``server_version_num``, hosts compare a remote pgbench's major with the
server's. It imports nothing of pgrig's but its errors, so hosts (below
pgsource) and pgsource use the same parser."""

from __future__ import annotations

import re

from pgrig.errors import UsageError


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


def major_in(text: str) -> str | None:
    """The major of the first ``N.M`` in a program's ``--version`` line:
    ``15`` of "pgbench (PostgreSQL) 15.18", ``9.6`` of "9.6.24"; None without one."""
    m = re.search(r"\d+\.\d+", text)
    return major_of(m.group(0)) if m else None


def version_num(version: str) -> int:
    """As ``server_version_num``: ``"9.6.24"`` -> 90624, ``"18.6"`` -> 180006."""
    parts = [*version_key(version), 0, 0, 0]
    if parts[0] < 10:
        return parts[0] * 10000 + parts[1] * 100 + parts[2]
    return parts[0] * 10000 + parts[1]


def major_of_num(version_num: int) -> str:
    """The major of a ``server_version_num``: 150018 -> ``"15"``, 90624 -> ``"9.6"``."""
    return str(version_num // 10000) if version_num >= 100000 else f"9.{version_num // 100 % 100}"
