"""A plug-in that goes wrong halfway through its ``register()``: a report
section first, then a workload without a schema. It is not declared in
pyproject.toml; tests/test_plugin_example.py adds its entry point line to show
that a refused plug-in leaves nothing of it registered (not even the section
it added before the error)."""

from __future__ import annotations

from collections.abc import Sequence

from pgrig import registry
from pgrig.document.model import Section
from pgrig.results import RunRecord, Study
from pgrig_example.workload import ExampleWorkload


def section(study: Study, records: Sequence[RunRecord]) -> Section | None:
    return Section("Half a plug-in", "half")


class Schemaless(ExampleWorkload):
    type = "schemaless"
    schema = None  # type: ignore[assignment]  # as a newcomer who forgot it
    kinds = ()
    actions = {}


def register() -> None:
    registry.register_section("half", section)
    registry.register(Schemaless())
