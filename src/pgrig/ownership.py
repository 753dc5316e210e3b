"""Who owns what pgrig leaves on disk between runs: work directories, lossy
mounts, the storage lab's filesystems and cgroups.

Every such record names its owner: the pgrig process (host, PID and the PID's
start time) and the study it ran. A record whose owner is gone is an orphan;
``pgrig clean`` removes every orphan, a run only its own study's (a resumed
or repeated run of the same campaign). Orphans of other studies are reported
and left to their owner or ``pgrig clean``: another study on the same state
directory may be merely paused, or on another host. A study is known by its campaign's name.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from pgrig import proc

_STUDY: ContextVar[str] = ContextVar("pgrig_study", default="")
_RUN_OF = re.compile(r"-\d{8}-\d{6}")  # what a study id adds to its campaign's name


def state_dir() -> Path:
    """Where pgrig keeps its records between runs: work directories, registered files,
    lossy mounts, the storage lab, saved kernel settings (``PGRIG_STATE_DIR`` overrides)."""
    override = os.environ.get("PGRIG_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pgrig"


def process_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot): a PID's identity over time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_alive(pid: int, host: str, start: int | None = None) -> bool:
    """Does the pgrig process that wrote a record (a work directory's marker, a
    mount or lab record) still own it? A record written on another host is
    always alive to us: its owner cannot be seen from here (a shared home or
    state directory), and judging it dead would delete another machine's live
    work. On this host: the PID runs and, when the record kept it, with the same
    start time (a recycled PID is not the owner)."""
    if host != socket.gethostname():
        return True
    if not proc.pid_alive(pid):
        return False
    now = process_start_time(pid)
    return start is None or now is None or now == start


def current_study() -> str:
    """The study whose records this process is writing ("" outside a study)."""
    return _STUDY.get()


@contextlib.contextmanager
def studying(study: str) -> Iterator[None]:
    """Records created inside the block belong to ``study``."""
    token = _STUDY.set(study)
    try:
        yield
    finally:
        _STUDY.reset(token)


def removable(record_study: str, campaign: str | None) -> bool:
    """May a run of ``campaign`` (None: ``pgrig clean``, every study) remove an
    orphan that the study ``record_study`` left? Yes when it is the same study: its
    id is the campaign's name (a campaign file) or the name and the start time (the
    quick study, ``name-YYYYmmdd-HHMMSS``). A record of an older pgrig names no
    study ("") and is left to ``pgrig clean``."""
    if campaign is None:
        return True
    if record_study == campaign:
        return True
    started = record_study[len(campaign) :] if record_study.startswith(campaign) else ""
    return bool(_RUN_OF.fullmatch(started))
