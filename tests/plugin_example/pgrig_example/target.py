"""``kind = "scratch"``: pgrig's throwaway cluster in a directory, with a key of
its own (``label``) that the report's target table shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgrig.registry.target import Target
from pgrig.schema import Schema, text
from pgrig.schema import Table as TomlTable
from pgrig.targets.directory import DirectoryKind


@dataclass(frozen=True)
class ScratchOptions:
    label: str


class ScratchKind(DirectoryKind):
    name = "scratch"
    summary = "a throwaway cluster in a scratch directory, with a label"
    schema = Schema("[[target]] scratch", text("label", "scratch", "what the report calls it"))

    def parse(self, table: TomlTable) -> Any:
        return ScratchOptions(**self.read_keys(table))

    def claims(self, spec: Any, power_loss: str | None) -> bool:
        return False  # chosen only by kind = "scratch"

    def describe(self, t: Target) -> dict[str, Any]:
        options = t.spec.options
        assert isinstance(options, ScratchOptions)
        return {**super().describe(t), "label": options.label}


KIND = ScratchKind()
