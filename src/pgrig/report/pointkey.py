"""A measured point of a pgbench workload across its repeats (``PointKey``: workload,
scale, duration, mode, clients); the study index groups the stored runs by it."""

from __future__ import annotations

from dataclasses import dataclass

from pgrig import registry
from pgrig.registry.shared import BUILTIN
from pgrig.results import (
    SCRIPTS_MODE,
    RunRecord,
)

# A curve: a point less its client count (clients are the curve's axis).
Curve = tuple[str, int | None, int, str, float | None]


@dataclass(frozen=True)
class PointKey:
    """One measured point of a pgbench workload, across its repeats."""

    workload: str
    scale: int | None
    duration: int
    mode: str
    # pgbench -R: the offered rate of an open-loop run (None: closed loop). Before
    # ``clients`` so that a curve (clients as its axis) is the key less its clients.
    rate: float | None
    clients: int

    @property
    def label(self) -> str:
        plural = "s" if self.clients != 1 else ""
        rate = f", {self.rate:,g} tps offered" if self.rate is not None else ""
        return f"{self._name}, {self.clients} client{plural}{rate}, {self.duration} s"

    @property
    def sweep_label(self) -> str:
        """The label less the clients and the offered rate: 'TPC-B read-write, scale 1, 3 s'."""
        return f"{self._name}, {self.duration} s"

    @property
    def _name(self) -> str:
        scale = f", scale {self.scale}" if self.scale is not None else ""
        mode = self.mode if self.mode not in (self.workload, SCRIPTS_MODE) else ""
        titled = registry.title(self.workload)  # "TPC-B": its mode always said
        name = f"{titled} {mode}" if titled != self.workload else f"{self.workload} {mode}".strip()
        return name + scale

    @property
    def curve(self) -> Curve:
        return (self.workload, self.scale, self.duration, self.mode, self.rate)

    def _order(self) -> tuple[str, int, int, str, float, int]:
        # A point with no scale (a custom script's) sorts before any scale:
        # None and int do not compare, and a series or gate sorts its points.
        scale = -1 if self.scale is None else self.scale
        rate = -1.0 if self.rate is None else self.rate
        return (self.workload, scale, self.duration, self.mode, rate, self.clients)

    def __lt__(self, other: PointKey) -> bool:
        return self._order() < other._order()


def point_key(rec: RunRecord) -> PointKey:
    p = rec.params
    scale = p.get("scale")
    return PointKey(
        workload=str(p.get("workload", BUILTIN)),
        scale=int(scale) if isinstance(scale, int) else None,
        duration=int(p.get("duration_s", 0) or 0),
        mode=str(p.get("mode", "?")),
        rate=float(p["rate"]) if isinstance(p.get("rate"), int | float) else None,
        clients=int(p.get("clients", 0) or 0),
    )


def point_order(item: tuple[PointKey, object]) -> tuple[object, ...]:
    key = item[0]
    mode_rank = {"select-only": 0, "read-write": 1}.get(key.mode, 2)
    rate = -1.0 if key.rate is None else key.rate
    return (key.workload, key.scale or 0, key.duration, mode_rank, key.mode, rate, key.clients)
