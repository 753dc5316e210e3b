"""The storage lab: what its build step and its memory limit record."""

from __future__ import annotations

from pgrig import registry
from pgrig.storage import kinds


def register() -> None:
    for kind in kinds.KINDS:
        registry.register_kind(kind)
