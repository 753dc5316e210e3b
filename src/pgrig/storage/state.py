"""The storage lab's registry: what pgrig created, so that ``clean()`` can undo it.

Every loop-device filesystem and every cgroup pgrig makes is written here
*before* it is created (the intent) and updated as each piece comes into being,
so that a ``kill -9`` at any moment leaves a record that names everything that
may exist. One JSON file per record under ``<state dir>/storage/``, written
atomically (temp file, fsync, rename, fsync the directory).

A record belongs to a live pgrig while its owner process runs; the owner is
identified by PID *and* the process start time, so a recycled PID does not keep
an orphan alive forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pgrig import ownership
from pgrig.files import write_atomically
from pgrig.ownership import state_dir

# The marker file inside every directory the lab creates: it holds the record id.
MARKER = ".pgrig-storage"
RECORDS = "storage"  # the records' directory in the state directory


def registry_dir() -> Path:
    return state_dir() / RECORDS


@dataclass(frozen=True)
class Record:
    """What one lab object (a filesystem target or a cgroup) consists of."""

    id: str
    kind: str  # "fs" or "cgroup"
    owner_pid: int
    owner_start: int | None
    host: str
    created_at: float
    # The marked directory holding the backing files and the mount point.
    directory: str | None = None
    backing_files: tuple[str, ...] = ()
    loop_devices: tuple[str, ...] = ()
    mountpoints: tuple[str, ...] = ()
    cgroups: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    note: str = ""
    study: str = ""  # the study that made it (pgrig.ownership)

    def owner_alive(self) -> bool:
        return ownership.owner_alive(self.owner_pid, self.host, self.owner_start)


def new_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


def new_record(kind: str, **fields: Any) -> Record:
    pid = os.getpid()
    return Record(
        id=new_id(kind),
        kind=kind,
        owner_pid=pid,
        owner_start=ownership.process_start_time(pid),
        study=ownership.current_study(),
        host=socket.gethostname(),
        created_at=time.time(),
        **fields,
    )


def _path(record_id: str) -> Path:
    return registry_dir() / f"{record_id}.json"


def save(record: Record) -> Record:
    write_atomically(_path(record.id), json.dumps(asdict(record), indent=1))
    return record


def update(record: Record, **changes: Any) -> Record:
    return save(replace(record, **changes))


def add(record: Record, name: str, item: str | int) -> Record:
    """Append ``item`` to the tuple field ``name`` (once) and save."""
    current = getattr(record, name)
    if item in current:
        return record
    return update(record, **{name: (*current, item)})


def forget(record: Record | str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _path(record if isinstance(record, str) else record.id).unlink()


def _from_json(data: dict[str, Any]) -> Record:
    for name in ("backing_files", "loop_devices", "mountpoints", "cgroups", "pids"):
        data[name] = tuple(data.get(name, ()))
    return Record(**data)


def load_all() -> list[Record]:
    records: list[Record] = []
    directory = registry_dir()
    if not directory.is_dir():
        return records
    for path in sorted(directory.glob("*.json")):
        try:
            records.append(_from_json(json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue  # a torn or foreign file: not a record we can act on
    return records


def orphans(
    kind: str | None = None, *, study: str | None = None, left: list[str] | None = None
) -> list[Record]:
    """Records whose owner is gone, of ``study`` (None: of every study); those of
    other studies are described in ``left`` (pgrig.ownership)."""
    found = []
    for r in load_all():
        if r.owner_alive() or (kind is not None and r.kind != kind):
            continue
        if ownership.removable(r.study, study):
            found.append(r)
        elif left is not None:
            left.append(
                f"storage lab {r.kind} {r.directory or r.note} (study {r.study or 'unknown'})"
            )
    return found


def write_marker(directory: Path, record: Record) -> None:
    write_atomically(directory / MARKER, json.dumps({"id": record.id}))


def marker_id(directory: Path) -> str | None:
    try:
        return str(json.loads((directory / MARKER).read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
