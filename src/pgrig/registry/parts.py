"""``Parts``: what a plug-in that is neither a workload nor a target kind adds,
as data (``pgrig.registry`` reads it, ``pgrig.registry.checks`` checks it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgrig.hosts.executor import Executor
from pgrig.registry.report import ReportSection, Rule
from pgrig.results import ResultKind
from pgrig.step import Action, Prepare

ActionMaker = Callable[..., Action | Prepare]


@dataclass(frozen=True)
class Parts:
    """What a plug-in that is neither a workload nor a target kind adds, declared
    as a workload declares its own: the registry reads it when the entry point
    loads, in this order (``probes = "pgrig.plugins.probes:PARTS"``)."""

    kinds: tuple[ResultKind, ...] = ()  # result kinds of its own
    actions: tuple[tuple[str, ActionMaker], ...] = ()  # (NAMESPACE.verb, action)
    executors: tuple[tuple[str, type[Executor]], ...] = ()  # (name, Executor class)
    sections: tuple[tuple[str, ReportSection], ...] = ()  # (name, report section)
    rules: tuple[tuple[str, Rule], ...] = ()  # (name, conclusion rule)


__all__ = ["ActionMaker", "Parts"]
