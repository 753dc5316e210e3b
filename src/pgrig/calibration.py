"""Load times this machine measured, for ``pgrig plan``'s estimates.

Every finished load records its size (scale, warehouses) and seconds under a
kind that names the loader (``tpcb:parallel``, ``tpcb:client``, ``tpcc``), in
``calibration.json`` of pgrig's state directory. An estimate for a size is a
line through what was measured: from two sizes or more, the least-squares
line (a fixed cost and a cost per unit, neither below zero); from one, that
load's seconds per unit; from none, the caller's default. Loads grow about
linearly (generation and vacuum are linear, the key's sort n log n), so a line
through small loads holds at ten times their size (bench/load_estimate.py).

A calibration belongs to the machine and, where the caller names it, to the
storage (``estimate_on``, ``record_on``): a load on seed 000's latency layer
took 151 s where the plain directory beside it took 18 s. A storage that never
loaded is estimated from the machine's other loads, then from its own. The
kinds stay bounded: a storage that is a directory no longer there (a test's or
a bench's temporary directory) is dropped when the file is saved, and past
``MAX_KINDS`` the kinds measured longest ago go.

Each point also keeps how busy the machine was as the measured work began
(``Busy``: the 1-minute load average per CPU, and /proc/pressure/cpu's
"some avg60" where the kernel has it): seed000's plan made from a calibration
recorded on a busy machine was off by 38% (docs/bench.md). ``pgrig plan``
says when the machine now is much busier or quieter than when the points it
used were recorded (``load_note``); it does not rescale the estimate, as no
measurement says by how much a load's time follows the machine's load. A
point of an older pgrig has no such fields: its load is unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from pgrig.files import write_atomically
from pgrig.ownership import state_dir

FILE = "calibration.json"
KEEP = 8  # measurements kept per kind: the latest, one per size
# Kinds kept in all: the machine's own (a few per workload) and the storages'
# beside them. The file had 52 after a day of tests and benches here, most of
# them temporary directories.
MAX_KINDS = 64
PSI_CPU = Path("/proc/pressure/cpu")
Points = dict[str, list[dict[str, float]]]  # the file: each kind's measurements


@dataclass(frozen=True)
class Busy:
    """How busy this machine was: the 1-minute load average over the CPU count,
    and the share of the last minute some task waited for a CPU
    (/proc/pressure/cpu "some avg60", percent; None where the kernel has no PSI)."""

    load: float
    cpu_some: float | None = None

    def describe(self) -> str:
        psi = (
            f", {self.cpu_some:.0f}% of the time a task waited for a CPU"
            if self.cpu_some is not None
            else ""
        )
        return f"load {self.load:.2f} per CPU{psi}"


def busy() -> Busy:
    """This machine now (the minute before: the averages' window)."""
    cpu_some = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line_ in PSI_CPU.read_text().splitlines():
            if line_.startswith("some "):
                fields = dict(f.split("=", 1) for f in line_.split()[1:])
                cpu_some = float(fields["avg60"])
    return Busy(os.getloadavg()[0] / (os.cpu_count() or 1), cpu_some)


def _path() -> Path:
    return state_dir() / FILE


def _read() -> Points:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: estimates fall back to the defaults
    return data if isinstance(data, dict) else {}


def _gone(kind: str) -> bool:
    """Is ``kind`` a storage's (``kind@/path`` or ``kind@/path: what``) whose
    directory no longer exists? Other storages (a lab's, a host's, a study's
    name) cannot be checked from here: kept."""
    _, at, storage = kind.partition("@")
    if not at or not storage.startswith("/"):
        return False
    return not Path(storage.split(": ", 1)[0]).exists()


def _bounded(data: dict[str, list[dict[str, float]]]) -> dict[str, list[dict[str, float]]]:
    """Without the gone storages' kinds, and at most MAX_KINDS: the latest measured."""
    kept = {k: v for k, v in data.items() if isinstance(v, list) and v and not _gone(k)}
    newest = sorted(kept, key=lambda k: max(float(p.get("at", 0)) for p in kept[k]))
    return {k: kept[k] for k in kept if k in newest[-MAX_KINDS:]}


def record(kind: str, size: float, seconds: float, busy_then: Busy | None = None) -> None:
    """Keep ``seconds`` as the latest load of ``size`` for ``kind``, with how busy
    the machine was as it began (``busy_then``, taken by the caller before the work;
    None: now)."""
    _record([kind], size, seconds, busy_then)


def line(kind: str, data: Points | None = None) -> tuple[float, float] | None:
    """(fixed seconds, seconds per unit) fitted to what ``kind`` measured, or None
    (``data``: the file, when the caller read it already)."""
    stored = (_read() if data is None else data).get(kind, [])
    if stored and (seen := _SEEN.get()) is not None:
        seen[kind] = stored
    points = [(p["size"], p["seconds"]) for p in stored]
    if not points:
        return None
    sizes = {x for x, _ in points}
    if len(sizes) == 1:
        size, seconds = max(points)
        return 0.0, seconds / size
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    fixed = my - slope * mx
    if slope <= 0:  # noise swamped the sizes: the largest load's rate
        size, seconds = max(points)
        return 0.0, seconds / size
    if fixed < 0:  # a line through zero instead
        return 0.0, sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return fixed, slope


def record_on(
    kind: str, storage: str, size: float, seconds: float, busy_then: Busy | None = None
) -> None:
    """``record`` for the machine and for this storage, in one save of the file."""
    _record([kind, f"{kind}@{storage}"] if storage else [kind], size, seconds, busy_then)


def _record(kinds: list[str], size: float, seconds: float, busy_then: Busy | None) -> None:
    if size <= 0 or seconds <= 0:
        return
    machine = busy_then or busy()
    point = {"size": float(size), "seconds": float(seconds), "at": time.time()}
    point["load"] = round(machine.load, 3)
    if machine.cpu_some is not None:
        point["cpu_some"] = machine.cpu_some
    data = _read()
    for kind in kinds:
        points = [p for p in data.get(kind, []) if p.get("size") != size]
        data[kind] = sorted([*points, point], key=lambda p: p["at"])[-KEEP:]
    with contextlib.suppress(OSError):  # a read-only state directory loses a hint, no more
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(_path(), json.dumps(_bounded(data), indent=1) + "\n")


def estimate_on(kind: str, storage: str, size: float, default: Callable[[float], float]) -> float:
    """``estimate`` from what this storage measured, else the machine, else
    ``default`` (the file read once for both)."""
    data = _read()

    def general(s: float) -> float:
        return estimate(kind, s, default, data)

    return estimate(f"{kind}@{storage}", size, general, data) if storage else general(size)


def estimate(
    kind: str, size: float, default: Callable[[float], float], data: Points | None = None
) -> float:
    """Seconds a load of ``size`` should take here; ``default(size)`` until one was
    measured (``data``: the file, when the caller read it already)."""
    fitted = line(kind, data)
    if fitted is None:
        return default(size)
    fixed, per_unit = fitted
    return fixed + per_unit * size


# The points the estimates inside ``watching`` were fitted to, per kind.
_SEEN: ContextVar[dict[str, list[dict[str, float]]] | None] = ContextVar("seen", default=None)


@contextlib.contextmanager
def watching() -> Iterator[dict[str, list[dict[str, float]]]]:
    """Collect the points every estimate made in the block was fitted to."""
    seen: dict[str, list[dict[str, float]]] = {}
    token = _SEEN.set(seen)
    try:
        yield seen
    finally:
        _SEEN.reset(token)


# Much busier or quieter: the load per CPU differs by this factor and by at
# least SIGNIFICANT_LOAD (0.1 against 0.3 per CPU is an idle machine both times).
FACTOR = 2.0
SIGNIFICANT_LOAD = 0.5


def load_note(seen: dict[str, list[dict[str, float]]], now: Busy) -> str | None:
    """What to say when the machine ``now`` is much busier or quieter than when
    the points in ``seen`` were recorded (their median load per CPU); None when
    alike, or when no point knows its load."""
    loads = [float(p["load"]) for points in seen.values() for p in points if "load" in p]
    if not loads:
        return None
    then = statistics.median(loads)
    some = [float(p["cpu_some"]) for points in seen.values() for p in points if "cpu_some" in p]
    ratio = max(now.load, 0.01) / max(then, 0.01)
    if abs(now.load - then) < SIGNIFICANT_LOAD or 1 / FACTOR < ratio < FACTOR:
        return None
    unknown = sum(1 for points in seen.values() for p in points if "load" not in p)
    then_busy = Busy(then, statistics.median(some) if some else None)
    how = f"{ratio:.1f}x busier" if ratio > 1 else f"{1 / ratio:.1f}x quieter"
    return (
        f"this machine is {how} now ({now.describe()}) than when the {len(loads)} "
        f"measurement(s) these estimates come from were recorded ({then_busy.describe()}, "
        f"median){f'; {unknown} more of unknown load' if unknown else ''}: the estimate may be "
        "off (docs/bench.md, plan_estimate); plan when the machine is as busy as then, or "
        "let a run here record the measurements again"
    )
