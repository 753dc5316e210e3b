"""The monitor: its record of every measured run."""

from __future__ import annotations

from pgrig import registry
from pgrig.monitor.model import MONITOR

PARTS = registry.Parts(kinds=(MONITOR,))
