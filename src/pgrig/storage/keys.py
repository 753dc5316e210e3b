"""The storage-lab keys of a campaign target, declared once (docs/campaigns.md
shows them): a filesystem built on a loop device (``fs``, ``size``, ``base``,
``mkfs``, ``mount``, ``log_size``, ``stripes``), an I/O cap (``disk = "essd-pl1:100GiB"``,
``iops``, ``mbps``), a cloud disk's latency (``latency``) under an instance's
cap shared by the target's emulated disks (``instance_iops``, ``instance_mbps``)
and a memory limit (``memory``).

    [[target]]
    name = "xfs"
    fs = "xfs"
    size = "8GiB"
    mkfs = ["-d", "su=64k,sw=2"]
    mount = "noatime,nodiratime"
    disk = "essd-pl1:100GiB"
    memory = "512MiB"
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pgrig.errors import UsageError
from pgrig.schema import Schema, Table, custom, integer, number, text
from pgrig.storage.loopfs import FSTYPES
from pgrig.units import parse_size

DEFAULT_BASE = "/var/tmp"
_DISK = re.compile(r"essd-(pl[0-3])\s*:\s*(\d+)\s*(gib|gb|g)?", re.IGNORECASE)


def parse_disk(value: str) -> tuple[str, int]:
    """``"essd-pl1:100GiB"`` -> ("PL1", 100)."""
    m = _DISK.fullmatch(value.strip())
    if m is None:
        raise UsageError(
            f"disk {value!r}: expected essd-pl0..essd-pl3 and a size in GiB",
            hint='e.g. disk = "essd-pl1:100GiB", or iops = ... and mbps = ... for any cap',
        )
    return m.group(1).upper(), int(m.group(2))


def _fs(t: Table, key: str, default: object) -> str | None:
    value = t.get(key, str)
    if value is not None and value not in FSTYPES:
        raise t.error(key, f"{value!r} is not one of {', '.join(FSTYPES)}")
    return value


def _size(t: Table, key: str, default: object) -> int | None:
    value = t.get(key, (str, int))
    if value is None:
        return None
    try:
        size = value if isinstance(value, int) else parse_size(value)
    except UsageError as exc:
        raise t.error(key, exc.message, hint='e.g. "8GiB" or "512MiB"') from exc
    if size <= 0:
        raise t.error(key, f"{value!r} must be more than 0")
    return size


def _base(t: Table, key: str, default: object) -> str | None:
    path = t.path_value(key)
    return None if path is None else str(path)


def _mkfs(t: Table, key: str, default: object) -> tuple[str, ...]:
    value = t.get(key, (list, str), [])
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise t.error(key, f"{value!r}: {exc}") from exc
    if not all(isinstance(v, str) for v in value):
        raise t.error(key, "expected a list of strings", hint='e.g. ["-d", "su=64k,sw=2"]')
    return tuple(value)


def _checked(parse: Callable[[str], object]) -> Callable[[Table, str, object], str | None]:
    """A string key whose value ``parse`` accepts; its refusal is named on the key."""

    def read(t: Table, key: str, default: object) -> str | None:
        value = t.get(key, str)
        if value is not None:
            try:
                parse(value)
            except UsageError as exc:
                raise t.error(key, exc.message, exc.hint) from exc
        return value

    return read


def _latency_class(value: str) -> object:
    from pgrig.storage.latency import parse_class  # it mounts FUSE: imported when asked

    return parse_class(value)


LAB_SCHEMA = Schema(
    "[[target]] storage lab",
    custom("fs", None, "build the target: `\"xfs\"`, `\"ext4\"` or `\"btrfs\"` made on a "
           "loop device, mounted, used and removed (`pgrig clean` removes it after a crash)", _fs),
    custom("size", None, "size of the filesystem, e.g. `\"8GiB\"` (with `fs`)", _size,
           field="size_bytes"),
    custom("base", None, "where the backing file goes: a directory on the host disk (with "
           "`fs`)", _base, shown_default=f'`"{DEFAULT_BASE}"`'),
    custom("mkfs", (), "extra mkfs arguments, e.g. `[\"-d\", \"su=64k,sw=2\"]` or "
           "`[\"-E\", \"stride=2,stripe-width=6\"]`", _mkfs, shown_default="`[]`"),
    text("mount", None, "mount options, e.g. `\"noatime,nodiratime,logbufs=8\"`; options the "
         "kernel refuses fail with its message"),
    integer("stripes", None, "spread the filesystem over this many loop devices, `size` split "
            "between them (with `fs = \"btrfs\"`: raid0 for data and metadata; an I/O cap then "
            "applies to each device, as to each of the seeds' striped disks)"),
    custom("log_size", None, "an external XFS log / ext4 journal of this size on a second loop "
           "device (seed 002's logdev)", _size, field="log_bytes"),
    custom("disk", None, "cap I/O like a cloud disk: `\"essd-pl1:100GiB\"` (PL0-PL3, the "
           "published IOPS and MB/s formula for that size)", _checked(parse_disk)),
    custom("latency", None, "emulate a cloud disk: its per-I/O latency on every sync and every "
           "read that misses the page cache, and its total IOPS and MB/s (reads and writes "
           "together): `\"essd-pl0\"`..`\"essd-pl3\"`, `\"gp2\"`, `\"gp3\"`, `\"io2\"`, "
           "`\"pd-ssd\"`, `\"hyperdisk-balanced\"`, sized as `\"essd-pl1:500GiB\"` (a native "
           "FUSE layer calibrated with fio; docs/storage-lab.md)", _checked(_latency_class)),
    number("iops", None, "cap read and write IOPS each (cgroup I/O throttling)", above=0),
    number("mbps", None, "cap read and write MB/s each", above=0),
    number("instance_iops", None, "the instance's own IOPS cap, reads and writes together, "
           "shared by every emulated disk of the target (`latency` on the target and on its "
           "`tablespace`/`index_tablespace`): seed 000's 8 disks reached 106k IOPS against one "
           "disk's 91.9k, the instance's cap", above=0),
    number("instance_mbps", None, "the instance's own MB/s cap, shared the same way", above=0),
    integer("cpus", None, "run the server and its clients (pgbench) on the first N CPUs only "
            "(a cpuset cgroup each): seed 000 compared 26 and 52 cores"),
    custom("memory", None, "run the server and its page cache in a memory cgroup of this size, "
           "e.g. `\"512MiB\"`; the profile sizes shared_buffers to it", _size,
           field="memory_bytes"),
)  # fmt: skip


def read(t: Table) -> dict[str, Any]:
    """The lab keys of one target table (not finishing it: the target's own
    schema refuses unknown keys)."""
    return {k.attr: k.read(t, k.name, k.default) for k in LAB_SCHEMA.keys}


def given(values: Mapping[str, object]) -> bool:
    return any(v not in (None, ()) for v in values.values())


def base_of(values: Mapping[str, object]) -> Path:
    base = values.get("base")  # a string or None, as _base reads it
    return Path(base if isinstance(base, str) and base else DEFAULT_BASE)
