"""The one interface every workload fills (fio's ``ioengine_ops``, BenchBase's
``BenchmarkModule``): what its campaign table holds, the steps it expands to,
its result kinds, and its report section.

A workload is one package holding a ``Workload`` subclass, registered through
a ``pgrig.plugins`` entry point (``pgrig.registry``). ``pgrig plan`` and the
runner both walk the same ``Phase`` objects,
so the plan shows exactly the steps the runner executes; docs/workloads.md
shows how to add one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pgrig.document.model import Section
from pgrig.pgsource.binaries import PgBinaries
from pgrig.policy import RunPolicy
from pgrig.registry.report import Rule, RunsReport
from pgrig.results import ResultKind, RunRecord, Study
from pgrig.schema import Checked, Schema, Table, given_checked
from pgrig.step import Step


class WorkloadSpec(Protocol):
    """A workload's parsed campaign table: a frozen dataclass with at least these."""

    @property
    def name(self) -> str: ...  # unique in the campaign: the middle part of its step keys

    @property
    def kind(self) -> str: ...  # the workload's ``type``


class TargetView(Protocol):
    """What a workload may know of a target while it makes steps."""

    @property
    def name(self) -> str: ...

    @property
    def tablespaces(self) -> dict[str, str | None]: ...

    @property
    def owned(self) -> bool: ...  # pgrig created this server (or --yes allows dropping data)

    @property
    def storage(self) -> str: ...  # where it is, in words: what its times are calibrated on

    @property
    def load_hosts(self) -> int: ...  # machines each running the clients (1: this one)


def on_hosts(target: TargetView, clients: int, what: str = "clients") -> str:
    """A step label's note of the load hosts: each runs ``clients`` (or TPC-C's
    connections: ``what``), the report counts them together."""
    n = target.load_hosts
    return "" if n <= 1 else f" on each of {n} load hosts ({clients * n} {what})"


def _no_steps(_target: TargetView) -> Sequence[Step]:
    return ()


def _nothing_after(_target: TargetView, _run: Step) -> Sequence[Step]:
    return ()


@dataclass(frozen=True)
class Series:
    """One measured point: ``make(target, repeat)`` on every target, interleaved
    and repeated as the run policy says, each run followed by ``after``'s steps."""

    make: Callable[[TargetView, int], Step]
    after: Callable[[TargetView, Step], Sequence[Step]] = _nothing_after
    repeated: bool = True  # False: once per target, whatever the policy


@dataclass(frozen=True)
class Phase:
    """A dataset and what is measured on it: ``data`` steps per target (load,
    setup, checks), then the series."""

    data: Callable[[TargetView], Sequence[Step]] = _no_steps
    series: Sequence[Series] = ()
    disk_bytes: int = 0  # a target's peak disk use in this phase (refused up front)
    label: str = ""


@dataclass(frozen=True)
class Needs:
    """What a workload asks of a target before anything runs."""

    # why it may not run on a server pgrig did not create without --yes; None: harmless
    destructive: str | None = None
    # the server tools it runs (binaries are checked up front)
    tools: tuple[str, ...] = field(default_factory=tuple)


class Workload(ABC):
    """A workload: one subclass per package, one instance registered in
    ``pgrig.registry`` (its ``pgrig.plugins`` entry point)."""

    type: ClassVar[str]  # the campaign's ``type = "..."``
    # What the report calls it where a spec keeps its type's name ("TPC-B"); "":
    # its name as it is.
    title: ClassVar[str] = ""
    # Where it comes among the workloads (the report's sections, the docs); the
    # entry points load in no set order. pgrig's own are 10-50; others come after.
    order: ClassVar[int] = 100
    schema: ClassVar[Schema]  # its ``[[workload]]`` keys
    kinds: ClassVar[tuple[ResultKind, ...]] = ()
    needs: ClassVar[Needs] = Needs()
    # Its step actions (``Call(name, ...)`` in its steps), added to the registry's
    # when it is registered.
    actions: ClassVar[Mapping[str, Callable[..., Any]]] = {}
    # Its conclusion rules: sentences the report draws from its records, after
    # the report's own rules.
    rules: ClassVar[tuple[Rule, ...]] = ()
    # Its measured runs go through ``Context.clients``: a remote target runs them
    # from its load hosts (its scripts copied there). False: it cannot run on a
    # remote target yet.
    from_load_hosts: ClassVar[bool] = False
    # Its runs need no load host: they reach the server from this machine over TCP
    # (pg_basebackup copies a remote server's data to a directory here), so it runs
    # on a remote target as it is.
    from_here: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parse" in cls.__dict__:  # one written as parse(self, table) still works
            cls.parse = given_checked(cls.__dict__["parse"])  # type: ignore[method-assign]

    @abstractmethod
    def parse(self, table: Table, read: Checked) -> WorkloadSpec:
        """The spec from a ``[[workload]]`` table, made from ``read``: its
        ``schema``'s keys as the campaign read them in one pass
        (``Schema.checked``): ``read.values``, and ``read.owned`` for the keys
        with readers of its own, which it calls (the refusal of a bad key among
        them, so call them all); errors via ``table.error``. A ``parse(self,
        table)`` (the interface before) reads its keys itself."""

    @abstractmethod
    def phases(self, spec: Any, policy: RunPolicy) -> list[Phase]:
        """The steps, in the order they run. Pure: ``pgrig plan`` calls it too."""

    # Its runs' sections, summary rows and figures (pgrig.registry.report); None:
    # its ``section`` alone shows it.
    runs_report: ClassVar[RunsReport | None] = None

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        """Its own part of the report, beyond the generic tables; None: nothing."""
        return None

    def connections(self, spec: Any) -> int:
        """The most client connections one of its runs opens at once: checked
        against the server's ``max_connections`` before anything runs. The
        default reads the spec's ``clients`` (counts, or one count) and
        ``connections``."""
        counts: list[int] = []
        for name in ("clients", "connections"):
            value = getattr(spec, name, None)
            if isinstance(value, int):
                counts.append(value)
            elif isinstance(value, tuple):
                counts.extend(v for v in value if isinstance(v, int))
        return max(counts, default=0)

    def check(self, spec: WorkloadSpec, bins: PgBinaries, source: str) -> None:
        """Refuse, with ``bins`` (a target's PostgreSQL binaries) known, what would
        fail only once its server runs: scripts its pgbench cannot read. Called by
        the validation pass for every target; ``source`` is where the spec was
        written (a campaign file, or "command line"). Nothing by default."""
        return None

    def loses_power(self, spec: Any) -> bool:
        """True: this spec cuts the power, so every target's cluster runs on the
        lossy filesystem (pgrig.lossyfs) - and nothing else may be measured there."""
        return False

    def describe(self, spec: Any) -> dict[str, Any]:
        """The spec as the study's params record it (fields marked ``runtime`` are
        hooks for tests and front doors, not part of the study)."""
        runtime = {f.name for f in fields(spec) if f.metadata.get("runtime")}
        return {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in asdict(spec).items()
            if k not in runtime
        } | {"type": self.type}
