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
loaded is estimated from the machine's other loads, then from its own.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from pgrig.cluster.workdir import state_dir
from pgrig.files import write_atomically

FILE = "calibration.json"
KEEP = 8  # measurements kept per kind: the latest, one per size


def _path() -> Path:
    return state_dir() / FILE


def _read() -> dict[str, list[dict[str, float]]]:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: estimates fall back to the defaults
    return data if isinstance(data, dict) else {}


def record(kind: str, size: float, seconds: float) -> None:
    """Keep ``seconds`` as the latest load of ``size`` for ``kind``."""
    if size <= 0 or seconds <= 0:
        return
    data = _read()
    points = [p for p in data.get(kind, []) if p.get("size") != size]
    points.append({"size": float(size), "seconds": float(seconds), "at": time.time()})
    data[kind] = sorted(points, key=lambda p: p["at"])[-KEEP:]
    with contextlib.suppress(OSError):  # a read-only state directory loses a hint, no more
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(_path(), json.dumps(data, indent=1) + "\n")


def line(kind: str) -> tuple[float, float] | None:
    """(fixed seconds, seconds per unit) fitted to what ``kind`` measured, or None."""
    points = [(p["size"], p["seconds"]) for p in _read().get(kind, [])]
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


def record_on(kind: str, storage: str, size: float, seconds: float) -> None:
    """``record`` for the machine and for this storage."""
    record(kind, size, seconds)
    if storage:
        record(f"{kind}@{storage}", size, seconds)


def estimate_on(kind: str, storage: str, size: float, default: Callable[[float], float]) -> float:
    """``estimate`` from what this storage measured, else the machine, else ``default``."""

    def general(s: float) -> float:
        return estimate(kind, s, default)

    return estimate(f"{kind}@{storage}", size, general) if storage else general(size)


def estimate(kind: str, size: float, default: Callable[[float], float]) -> float:
    """Seconds a load of ``size`` should take here; ``default(size)`` until one was measured."""
    fitted = line(kind)
    if fitted is None:
        return default(size)
    fixed, per_unit = fitted
    return fixed + per_unit * size
