"""One profile, many majors: settings translated where a major renamed a parameter
or a value, dropped - with the reason, reported - where a major lacks it.

``adapt(settings, bins)`` returns what goes into the cluster's configuration and
what was changed on the way; nothing is dropped silently. A parameter no major
from 9.5 to 18 knows is a mistake in the profile and an error.

Which major has which parameter comes from ``pg_params.tsv``, read off each
major's ``postgres --describe-config`` (scripts/pg_params.py); the server being
configured has the last word through its own ``--describe-config``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from pgrig.errors import UsageError

SEGMENT_MB = 16  # the WAL segment size where the cluster's own is unknown (fixed before 11)


@dataclass(frozen=True)
class Translated:
    name: str
    value: str
    new_name: str
    new_value: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} = {self.value} -> {self.new_name} = {self.new_value}: {self.reason}"


@dataclass(frozen=True)
class Dropped:
    name: str
    value: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} = {self.value} not set: {self.reason}"


@dataclass(frozen=True)
class Adapted:
    version: str  # the server's release, e.g. "9.6.24"
    applied: dict[str, str]
    translated: tuple[Translated, ...] = ()
    dropped: tuple[Dropped, ...] = ()
    # One line per change, for the log, the report and pgrig.conf's comments:
    # part of the result, as every user of an adaptation shows them.
    notes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(str(c) for c in (*self.translated, *self.dropped)))


@dataclass(frozen=True)
class Span:
    first: str
    last: str


def _key(major: str) -> tuple[int, ...]:
    return tuple(int(p) for p in major.split("."))


def _major(version_num: int) -> str:
    return str(version_num // 10000) if version_num >= 100000 else f"9.{version_num // 100 % 100}"


@cache
def _table() -> tuple[dict[str, Span], tuple[str, ...]]:
    text = resources.files("pgrig.cluster").joinpath("pg_params.tsv").read_text()
    spans: dict[str, Span] = {}
    majors: tuple[str, ...] = ()
    for line in text.splitlines():
        if line.startswith("# majors checked:"):
            majors = tuple(line.split(":", 1)[1].split())
        if not line.strip() or line.startswith("#"):
            continue
        name, first, last = line.split("\t")
        spans[name.lower()] = Span(first, last)
    return spans, majors


def span(name: str) -> Span | None:
    return _table()[0].get(name.lower())


def majors_checked() -> tuple[str, ...]:
    return _table()[1]


def to_mb(value: str) -> int | None:
    """A memory/WAL size in MB: "4GB" -> 4096; a bare number is taken as MB (the unit
    of max_wal_size since 10)."""
    m = re.fullmatch(r"\s*(\d+)\s*(kB|MB|GB|TB)?\s*", value.strip("'"))
    if not m:
        return None
    factor = {None: 1, "kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}[m.group(2)]
    return max(1, math.ceil(int(m.group(1)) * factor))


# -- renames: (old name, new name, old -> new value, new -> old value, why) ---------

# A converter gets the value and the cluster's WAL segment size in MB.
Convert = Callable[[str, int], str | None]


def _segments_to_mb(per: int, *, fixed_mb: int | None = None) -> Convert:
    """``fixed_mb``: a size the old parameter always counted in, whatever the cluster's."""

    def convert(value: str, segment_mb: int) -> str | None:
        n = value.strip("'")
        return f"{int(n) * per * (fixed_mb or segment_mb)}MB" if n.isdigit() else None

    return convert


def _mb_to_segments(per: int, *, fixed_mb: int | None = None) -> Convert:
    def convert(value: str, segment_mb: int) -> str | None:
        mb = to_mb(value)
        seg = fixed_mb or segment_mb
        return None if mb is None else str(max(1, math.ceil(mb / (per * seg))))

    return convert


def _same(value: str, segment_mb: int) -> str | None:
    return value


RENAMES: tuple[tuple[str, str, Convert, Convert, str], ...] = (
    (
        "checkpoint_segments",
        "max_wal_size",
        # 9.4 and older could only be built with 16MB segments (no initdb option).
        _segments_to_mb(3, fixed_mb=SEGMENT_MB),
        _mb_to_segments(3, fixed_mb=SEGMENT_MB),
        "9.5 replaced checkpoint_segments by max_wal_size = 3 x segments x 16MB",
    ),
    (
        "wal_keep_segments",
        "wal_keep_size",
        _segments_to_mb(1),
        _mb_to_segments(1),
        "13 replaced wal_keep_segments by wal_keep_size = segments x {segment_mb}MB",
    ),
    (
        "min_parallel_relation_size",
        "min_parallel_table_scan_size",
        _same,
        _same,
        "10 renamed min_parallel_relation_size to min_parallel_table_scan_size",
    ),
    (
        "force_parallel_mode",
        "debug_parallel_query",
        _same,
        _same,
        "16 renamed force_parallel_mode to debug_parallel_query",
    ),
)


def _value_translation(name: str, value: str, version_num: int) -> tuple[str, str] | None:
    """(new value, why) where this major spells a value differently."""
    v = value.strip("'").lower()
    if name == "wal_level":
        if v == "replica" and version_num < 90600:
            return "hot_standby", "before 9.6 the level replica was called hot_standby"
        if v in ("archive", "hot_standby") and version_num >= 90600:
            return "replica", f"9.6 merged archive and hot_standby into replica ({v} is an alias)"
    if name == "wal_compression" and v in ("pglz", "lz4", "zstd") and version_num < 150000:
        return "on", f"before 15 wal_compression is on/off and always uses pglz (asked: {v})"
    return None


def _dropped_reason(name: str, major: str, known_span: Span) -> str:
    if _key(major) < _key(known_span.first):
        return f"PostgreSQL {major} has no {name} (added in {known_span.first})"
    if _key(major) > _key(known_span.last):
        return f"PostgreSQL {major} has no {name} (last in {known_span.last})"
    listed = f"{known_span.first} to {known_span.last}"
    return f"PostgreSQL {major} does not list {name} (listed in {listed})"


def unknown_everywhere(name: str, where: str, major: str) -> UsageError:
    every = sorted(_table()[0])
    close = difflib.get_close_matches(name, every, n=1)
    checked = majors_checked()
    range_ = f"{checked[0]} to {checked[-1]}" if checked else "any checked"
    return UsageError(
        f"{where}: unknown PostgreSQL {major} parameter {name!r} (and no major from "
        f"{range_} has it)",
        hint=f"did you mean {close[0]!r}?" if close else "check the name in pg_settings",
    )


def adapt(
    settings: Mapping[str, str],
    *,
    known: set[str],
    version: str,
    version_num: int,
    where: Callable[[str], str] = lambda name: "profile",
    segment_mb: int | None = None,
) -> Adapted:
    """Fit ``settings`` to a server that knows the parameters ``known``; ``where``
    says where a setting was written, for the error about a name no major has;
    ``segment_mb`` is the cluster's WAL segment size (initdb --wal-segsize), which
    wal_keep_segments counts in (16 where unknown: the only size before 11)."""
    seg = segment_mb or SEGMENT_MB
    major = _major(version_num)
    applied: dict[str, str] = {}
    translated: list[Translated] = []
    dropped: list[Dropped] = []
    known_lower = {k.lower() for k in known}
    for name, value in settings.items():
        target, new_value, why = name, value, ""
        if name not in known_lower:
            for old, new, forward, backward, reason in RENAMES:
                reason = reason.format(segment_mb=seg)
                if name == old and new in known_lower:
                    target, new_value, why = new, forward(value, seg) or "", reason
                elif name == new and old in known_lower:
                    target, new_value, why = old, backward(value, seg) or "", reason
            if target != name and not new_value:
                dropped.append(Dropped(name, value, f"cannot translate {value!r}: {why}"))
                continue
        value_change = _value_translation(target, new_value, version_num)
        if value_change:
            new_value, value_why = value_change
            why = f"{why}; {value_why}" if why else value_why
        if target in known_lower or "." in target:  # dotted names are extensions'
            if (target, new_value) != (name, value):
                translated.append(Translated(name, value, target, new_value, why))
            applied[target] = new_value
            continue
        known_span = span(name)
        if known_span is None:
            raise unknown_everywhere(name, where(name), major)
        dropped.append(Dropped(name, value, _dropped_reason(name, major, known_span)))
    return Adapted(version, applied, tuple(translated), tuple(dropped))


# -- what the newest pgbench can do against an older server -------------------------

PARTITIONS_FROM = 110000


def check_pgbench_init(version: str, version_num: int, *, partitions: int = 0) -> None:
    """Refuse, before anything starts, a ``pgbench -i`` the server cannot take.

    Measured with pgbench 18 against 9.5 to 18: client-side (``-I g``) and
    server-side (``-I G``) generation, ``--unlogged-tables`` and foreign keys work
    on every major; ``--partitions`` fails before 11 (9.x cannot PARTITION BY, 10
    cannot put a primary key on a partitioned table).
    """
    if partitions and version_num < PARTITIONS_FROM:
        raise UsageError(
            f"pgbench --partitions needs PostgreSQL 11 or later; the server is {version} "
            "(it cannot put a primary key on a partitioned pgbench_accounts)",
            hint="leave out --partitions for this version, or use PostgreSQL 11+",
        )
