"""The storage lab: what its build step, its memory limit and its latency layer
record, and the latency layer's section of the report."""

from __future__ import annotations

from pgrig import registry
from pgrig.report import emulator
from pgrig.storage import kinds


def register() -> None:
    for kind in kinds.KINDS:
        registry.register_kind(kind)
    registry.register_section("emulator", emulator.section)
