"""A plain directory on the storage under test: the throwaway cluster and the
probes go into it (``directory = "/data01"``). Every target without another
kind's keys is this kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgrig.targets.throwaway import Throwaway

if TYPE_CHECKING:
    from pgrig.registry.target import TargetSpec


class DirectoryKind(Throwaway[None]):
    name = "directory"
    order = 50
    summary = "a throwaway cluster in a directory on the storage under test"

    def claims(self, spec: TargetSpec, power_loss: str | None) -> bool:
        return True  # the last resort: registered after every kind it must not shadow


KIND = DirectoryKind()
