"""Kernel settings as an axis of a study (seed 002's dirty-page settings that
explain its ext4 stalls), applied around each point of the variant that asks
for them and restored after it.

A kernel setting belongs to the whole machine, not to one cluster, so it is
set for the duration of one step (a load, a measured run) and put back at
once; targets interleave, and each finds the machine as it asked for it.
Before anything is written, the original values go to a state record
(``<state>/kernel/<id>.json``, atomically); a pgrig killed with -9 while a
setting was changed leaves that record, and the next ``pgrig run`` or
``pgrig clean`` writes the originals back (``restore_orphans``). Two pgrig
processes on one machine (two studies, two CI jobs) take turns: a step holds
an exclusive lock on ``<state>/kernel/lock`` while its settings are in force,
so neither saves the other's values as originals nor runs under them.

Names are sysctl names (``vm.dirty_background_bytes``: ``/proc/sys/vm/...``)
or ``clocksource`` (the current clocksource in sysfs).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pgrig.errors import UsageError
from pgrig.files import write_atomically
from pgrig.ownership import owner_alive, process_start_time, state_dir
from pgrig.storage.state import new_id, new_record

CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")


def path_of(name: str) -> Path | None:
    """The file behind a kernel setting's name, or None when the name is none."""
    if name == "clocksource":
        return CLOCKSOURCE
    if "." not in name or not all(p.replace("_", "").isalnum() for p in name.split(".")):
        return None
    path = Path("/proc/sys") / name.replace(".", "/")
    return path if path.is_file() else None


def is_kernel_setting(name: str) -> bool:
    return path_of(name) is not None


def read(name: str) -> str:
    path = path_of(name)
    if path is None:
        raise UsageError(f"{name} is not a kernel setting here (no /proc/sys or sysfs file)")
    return " ".join(path.read_text().split())


def _write(name: str, value: str) -> None:
    path = path_of(name)
    assert path is not None
    path.write_text(value)


RECORDS = "kernel"  # the saved settings' directory in the state directory


def registry_dir() -> Path:
    return state_dir() / RECORDS


@dataclass(frozen=True)
class Saved:
    """The original values of what one pgrig process changed (the orphan marker)."""

    id: str
    owner_pid: int
    owner_start: int | None
    host: str
    values: dict[str, str]


def _record(saved: Saved) -> Path:
    return registry_dir() / f"{saved.id}.json"


def check(settings: Sequence[tuple[str, str]], *, trial: bool = True) -> None:
    """Refuse before anything runs: unknown names, not root, a value of another
    shape than the kernel's own, a clocksource it does not offer; with ``trial``
    (a run, about to set them anyway), a value the kernel refuses (tried and put
    back at once). Without, reads only: `pgrig plan` changes nothing (it wrote
    each value and put it back, and a clocksource the kernel ignores was
    accepted: issue 40.7)."""
    for name, value in settings:
        path = path_of(name)
        if path is None:
            raise UsageError(f"{name} is not a kernel setting on this machine")
        if not os.access(path, os.W_OK):
            raise UsageError(
                f"{name} = {value}: this user cannot change it ({path})",
                hint="kernel settings need root",
            )
        now = read(name)
        if name == "clocksource":
            offered = (CLOCKSOURCE.parent / "available_clocksource").read_text().split()
            if value not in offered:
                raise UsageError(
                    f"clocksource = {value}: this kernel offers {', '.join(offered)}",
                    hint="one of those (the kernel ignores any other)",
                )
        elif _shape(now) == "numbers" and _shape(value) != "numbers":
            raise UsageError(
                f"{name} = {value}: the kernel holds numbers there (now: {now})",
                hint=f"a value of that form, e.g. {now}",
            )
    if settings and trial:
        with applied(settings):
            pass


def _shape(text: str) -> str:
    return "numbers" if all(w.lstrip("-").isdigit() for w in text.split()) else "text"


# How long a step waits for another pgrig's kernel settings to be put back: one
# of its steps (a load, a measured run) at most, in any study worth running.
TURN_WAIT_S = 3600.0


@contextlib.contextmanager
def _turn() -> Iterator[None]:
    """The machine's kernel settings to this process alone for the block (a
    lock the kernel drops with a process killed -9)."""
    directory = registry_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / "lock", "a") as fh:
        deadline = time.monotonic() + TURN_WAIT_S
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UsageError(
                        f"another pgrig has held this machine's kernel settings for "
                        f"{TURN_WAIT_S:.0f} s ({directory / 'lock'})",
                        hint="let its study end (or stop it) and run again",
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def applied(settings: Sequence[tuple[str, str]]) -> Iterator[None]:
    """Set ``settings`` for the ``with`` block; the originals are recorded first
    and written back after, also after an exception. Another pgrig's settings
    are waited out first (``_turn``)."""
    if not settings:
        yield
        return
    with _turn(), _applied(settings):
        yield


@contextlib.contextmanager
def _applied(settings: Sequence[tuple[str, str]]) -> Iterator[None]:
    record = new_record("kernel")
    saved = Saved(
        new_id("kernel"),
        record.owner_pid,
        process_start_time(record.owner_pid),
        record.host,
        _originals([name for name, _ in settings]),
    )
    write_atomically(_record(saved), json.dumps(asdict(saved)), mode=0o600)
    try:
        for name, value in settings:
            try:
                _write(name, value)
                if name == "clocksource" and read(name) != value:  # ignored, not refused
                    raise OSError(errno.EINVAL, f"the kernel kept {read(name)}")
            except OSError as exc:
                raise UsageError(
                    f"the kernel refused {name} = {value}: {exc.strerror or exc}",
                    hint="kernel settings need root, and a value the kernel accepts "
                    f"(now: {saved.values[name]})",
                ) from exc
        yield
    finally:
        _restore(saved)


# The kernel keeps one of each pair in force: writing a *_bytes setting zeroes its
# *_ratio and back, and a 0 is refused (EINVAL). A pair is saved whole and put back
# by writing the member that was in force. The defaults restore a record saved
# before pairs were (it held the bytes' 0 alone, and every run said EINVAL).
PAIRS = {
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_ratio": "vm.dirty_bytes",
}
RATIO_DEFAULTS = {"vm.dirty_background_ratio": "10", "vm.dirty_ratio": "20"}


def _originals(names: Sequence[str]) -> dict[str, str]:
    """The values to put back: each name's, with its pair's companion."""
    wanted = [*names, *(PAIRS[n] for n in names if n in PAIRS)]
    return {name: read(name) for name in dict.fromkeys(wanted)}


def _to_write(values: dict[str, str]) -> dict[str, str]:
    """What restores ``values``: of a pair, the member in force (not 0)."""
    out = dict(values)
    for name, value in values.items():
        other = PAIRS.get(name)
        if other is None or value != "0":
            continue
        out.pop(name)
        if other not in values and other in RATIO_DEFAULTS:
            out[other] = RATIO_DEFAULTS[other]
    return out


def _restore(saved: Saved) -> list[str]:
    """Write the originals back; the record goes once every one is back."""
    lines, failed = [], False
    for name, value in _to_write(saved.values).items():
        try:
            if read(name) != value:
                _write(name, value)
                lines.append(f"restored {name} = {value}")
        except (OSError, UsageError) as exc:
            failed = True
            lines.append(f"could not restore {name} = {value}: {exc}")
    if not failed:
        _record(saved).unlink(missing_ok=True)
    return lines


def restore_orphans() -> list[str]:
    """The kernel settings of pgrig processes that are gone, put back."""
    lines: list[str] = []
    directory = registry_dir()
    if not directory.is_dir():
        return lines
    for path in sorted(directory.glob("*.json")):
        try:
            saved = Saved(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if owner_alive(saved.owner_pid, saved.host, saved.owner_start):
            continue
        lines += [
            f"{line} (left by killed pgrig pid {saved.owner_pid})" for line in _restore(saved)
        ]
    return lines
