"""The ``type = "basebackup"`` campaign table (docs/basebackup.md)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pgrig.cluster.profiles import settings_of
from pgrig.errors import DiskSpaceError
from pgrig.schema import Checked, Schema, Table, choice, custom, integer, text
from pgrig.units import GB, MB

FORMATS = ("plain", "tar")
CHECKPOINTS = ("fast", "spread")
WAL_METHODS = ("stream", "fetch", "none")
_COMPRESS = re.compile(r"(?:(client|server)-)?(none|gzip|lz4|zstd)(?::(\S+))?")
_RATE = re.compile(r"(\d+)\s*([kKmM]?)")
# pg_basebackup -r accepts 32 kB/s to 1024 MB/s.
RATE_MIN_KB, RATE_MAX_KB = 32, 1024 * 1024


@dataclass(frozen=True)
class BasebackupSpec:
    name: str = "basebackup"
    scale: int = 10
    format: str = "plain"
    checkpoint: str = "fast"
    wal_method: str = "stream"
    compress: str = "none"
    max_rate: str | None = None
    to: str = ""  # "": the same target; a target's name; or a directory (holds a "/")
    to_directory: Path | None = None  # ``to`` resolved, when it is a directory
    repeat: int | None = None  # None: the campaign's repeat policy
    timeout_s: float | None = None  # None: 10 minutes plus 1 s per MB of data
    # `set`: settings pgrig's server restarts at for the copies, and back after
    settings: dict[str, str] = field(default_factory=dict)

    kind: ClassVar[str] = "basebackup"

    @property
    def to_target(self) -> str | None:
        """The target the copy goes to when ``to`` names one; None otherwise."""
        return self.to if self.to and self.to_directory is None else None


def _compress(t: Table, key: str, default: str) -> str:
    value = str(t.get(key, (str, int), default))
    if value.isdigit():  # a gzip level, as pg_basebackup -Z 5
        value = f"gzip:{value}" if value != "0" else "none"
    m = _COMPRESS.fullmatch(value)
    if m is None:
        raise t.error(
            key,
            f"{value!r} is not a compression",
            hint='"none", "gzip", "gzip:5", "lz4", "zstd:3", or "server-zstd" '
            "(pg_basebackup --compress)",
        )
    return value


def _max_rate(t: Table, key: str, default: str | None) -> str | None:
    value = t.get(key, (str, int), default)
    if value is None:
        return None
    m = _RATE.fullmatch(str(value).strip())
    if m is None:
        raise t.error(key, f"{value!r} is not a rate", hint='kB/s as a number, or "500k", "100M"')
    kb = int(m.group(1)) * (1024 if m.group(2).lower() == "m" else 1)
    if not RATE_MIN_KB <= kb <= RATE_MAX_KB:
        raise t.error(key, f"{value!r}: pg_basebackup -r takes 32 kB/s to 1024 MB/s")
    return f"{kb}k"


def _to(t: Table, key: str, default: str) -> str:
    value = t.get(key, str, default)
    if not value or "/" in value:
        return str(value)
    known = t.ctx.targets
    if known and value not in known:
        raise t.error(
            key,
            f"no target named {value!r}",
            hint=f"targets: {', '.join(known)}; or give a directory (a path with a '/')",
        )
    return str(value)


def _timeout(t: Table, key: str, default: float | None) -> float | None:
    value = t.get(key, float, default)
    if value is not None and value <= 0:
        raise t.error(key, f"{value:g}: a number of seconds above 0")
    return value


SCHEMA = Schema(
    'type = "basebackup"',
    text("name", "basebackup", "the workload's name in step keys and the report"),
    integer("scale", 10, "TPC-B data to copy: reused when the tables of this scale are loaded "
            "already (a `tpcb` workload before this one), else loaded with `pgbench -i`"),
    choice("format", FORMATS, "plain", "pg_basebackup `-F`: a data directory, or tar files"),
    choice("checkpoint", CHECKPOINTS, "fast", "pg_basebackup `-c`: `fast` requests an "
           "immediate checkpoint, `spread` waits for a paced one (the tool's default)"),
    choice("wal_method", WAL_METHODS, "stream", "pg_basebackup `-X`"),
    custom("compress", "none", "pg_basebackup `--compress`: `gzip`, `gzip:5`, `lz4`, "
           "`zstd:3`, `server-zstd`...; a plain copy takes server-side compression only",
           _compress),
    custom("max_rate", None, "pg_basebackup `-r`: kB/s, or `\"500k\"`, `\"100M\"`",
           _max_rate),
    custom("to", "", "where the copy goes: another target's name (its directory, the seed's "
           "second disk), or a directory; pgrig makes a marked directory there and removes "
           "it after each run", _to, shown_default="the same target"),
    custom("repeat", None, "runs per target, overriding the campaign's `repeat`",
           lambda t, k, d: t.ints(k, (1,))[0] if k in t.data else None,
           shown_default="the campaign's"),
    custom("timeout", None, "seconds before a run is stopped", _timeout, field="timeout_s",
           shown_default="600 + 1 per MB of data"),
    custom("set", None, "`[workload.set]`: settings the cluster pgrig created restarts at for "
           "each copy, and back to the profile's after: seed 002 backed up at `wal_level = "
           "hot_standby` with archiving where its TPC-B ran at 9.5's `minimal`", settings_of,
           kind=Table, field="settings", shown_default="`{}`"),
    also=("type",),
)  # fmt: skip


def copy_bytes(scale: int) -> int:
    """A copy's peak size: the data (16 MB per scale unit), WAL streamed meanwhile
    and the catalog of an empty cluster."""
    return scale * 16 * MB + 64 * MB + 48 * MB


def parse(t: Table, read: Checked) -> BasebackupSpec:
    values = read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}
    spec = BasebackupSpec(**values)
    method = _COMPRESS.fullmatch(spec.compress)
    assert method is not None
    where, algorithm = method.group(1), method.group(2)
    if spec.format == "plain" and algorithm != "none" and where != "server":
        raise t.error(
            "compress",
            f"{spec.compress!r}: a plain copy is written as files, which the client "
            "cannot compress",
            hint=f'use format = "tar", or compress = "server-{algorithm}" (PostgreSQL 15+)',
        )
    if spec.to and "/" in spec.to:
        directory = t.path_value("to")
        assert directory is not None
        if not directory.is_dir():
            raise t.error(
                "to",
                f"directory {directory} does not exist",
                hint="create it on the storage you want the copies on, or name a target",
            )
        need = copy_bytes(spec.scale)
        free = shutil.disk_usage(directory)
        if free.total > 0 and free.free < need:
            raise DiskSpaceError(
                f"{t.where('to')}: not enough free disk in {directory} for a copy of scale "
                f"{spec.scale}: needs about {need / GB:.1f} GiB, {free.free / GB:.1f} GiB free",
                hint="lower scale, free some space, or send the copies elsewhere",
            )
        spec = BasebackupSpec(**{**values, "to_directory": directory.resolve()})
    return spec
