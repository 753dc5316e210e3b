"""The storage lab: what its build step, its memory limit and its latency layer
record, and the latency layer's section of the report."""

from __future__ import annotations

from pgrig import registry
from pgrig.report import emulator
from pgrig.storage import kinds

PARTS = registry.Parts(kinds=kinds.KINDS, sections=(("emulator", emulator.section),))
