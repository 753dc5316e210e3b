"""What a campaign will do and what it needs, decided before anything runs.

A ``Plan`` is made once (``make``): the campaign's targets as its workloads see
them and its workloads' phases, as data. Validation sizes it (``Plan.steps``,
``disk_needs``) and the runner runs its phases (``validate.Checked.plan``).
``steps`` walks the same phases the runner executes (``Workload.phases``,
``RunPolicy.order``), so ``expand`` lists exactly the steps the runner runs -
repeats counted at their minimum - with a time estimate; ``disk_needs`` says
how much disk each target needs; ``check_space`` refuses what cannot fit.
(The quick study, ``pgrig run`` with no file, is a campaign document made of
its options: ``pgrig.commands.quick``.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig import calibration, probe, registry
from pgrig.campaign import Campaign
from pgrig.files import check_space as check_space  # where the steps' checks find it
from pgrig.policy import RunPolicy
from pgrig.registry import AnyKind
from pgrig.registry.target import TargetSpec
from pgrig.registry.workload import Phase, TargetView, Workload
from pgrig.step import Step

if TYPE_CHECKING:
    from pgrig.registry.target import Target


@dataclass(frozen=True)
class PlannedTarget:
    """A target as a workload sees it while steps are made (``TargetView``)."""

    name: str
    tablespaces: dict[str, str | None] = field(default_factory=dict)
    owned: bool = True
    storage: str = ""
    load_hosts: int = 1

    @classmethod
    def of(cls, spec: TargetSpec, kind: AnyKind) -> PlannedTarget:
        """A target not checked (``pgrig plan``): its kind says it from the spec."""
        return cls(
            spec.name,
            _tablespaces(spec),
            owned=kind.creates_server,
            storage=kind.where(spec)[0],
            load_hosts=kind.load_hosts(spec),
        )

    @classmethod
    def checked(cls, t: Target) -> PlannedTarget:
        """A checked target, as its check settled it (its load hosts resolved once)."""
        return cls(t.name, _tablespaces(t.spec), t.owned, t.storage, t.load_hosts)


def _tablespaces(spec: TargetSpec) -> dict[str, str | None]:
    return {"tablespace": spec.tablespace, "index_tablespace": spec.index_tablespace}


@dataclass(frozen=True)
class TargetPlan:
    """One target's part of a plan: the target as the workloads see it, and what
    its kind adds around them (asked once: the runner runs these steps)."""

    view: PlannedTarget
    build: Step | None  # its storage built (``TargetKind.build_step``)
    probes: Path | None  # where its storage probes run (``TargetKind.probes_at``)
    end: Step | None  # after the servers stopped (``TargetKind.end_step``)


@dataclass(frozen=True)
class Plan:
    """A campaign's plan, made once: each target's part (by name, in the
    campaign's order) and the workloads' phases, in the runner's order."""

    campaign: Campaign
    targets: Mapping[str, TargetPlan]
    phases: Sequence[Phase]

    def size(self) -> tuple[float, int]:
        """The plan's seconds and steps, without making every step: both grow
        linearly with ``repeat``, so two repetitions tell the rest (--repeat 1000000
        is refused in a moment, not after a million steps were made)."""
        repeat = self.campaign.policy.repeat
        if repeat <= 2:
            return self._measured()
        (s1, n1), (s2, n2) = self.with_repeat(1)._measured(), self.with_repeat(2)._measured()
        return s1 + (repeat - 1) * (s2 - s1), n1 + (repeat - 1) * (n2 - n1)

    def _measured(self) -> tuple[float, int]:
        steps = [step for _, step in self.steps()]
        return sum(step.estimate_s for step in steps), len(steps)

    def with_repeat(self, repeat: int) -> Plan:
        """The same plan at another ``repeat`` (a workload's phases may depend on it)."""
        if repeat == self.campaign.policy.repeat:
            return self
        camp = replace(self.campaign, policy=replace(self.campaign.policy, repeat=repeat))
        return replace(self, campaign=camp, phases=phases(camp))

    def steps(self) -> Iterator[tuple[TargetView, Step]]:
        """Every step, in the order the runner executes them."""
        camp = self.campaign
        views = [p.view for p in self.targets.values()]
        yield from ((p.view, p.build) for p in self.targets.values() if p.build is not None)
        if camp.probes is not None:
            # Probe by probe, target after target (as the runner does): the same
            # probe runs close in time on every target.
            per_target = [
                (p.view, probe.steps(camp.probes, p.view.name, p.probes))
                for p in self.targets.values()
                if p.probes is not None
            ]
            for i in range(max((len(s) for _, s in per_target), default=0)):
                for t, probe_steps in per_target:
                    if i < len(probe_steps):
                        yield t, probe_steps[i]
        there: dict[str, str] = {}  # target -> the data its last data step left
        for phase in self.phases:
            for view, step in phase_steps(phase, views, camp.policy):
                if step.leaves:
                    if step.reused_s is not None and there.get(view.name) == step.leaves:
                        step = replace(step, estimate_s=step.reused_s)
                    there[view.name] = step.leaves
                yield view, step
        yield from ((p.view, p.end) for p in self.targets.values() if p.end is not None)


def make(
    campaign: Campaign, checked: Sequence[Target] = (), made: Sequence[Phase] | None = None
) -> Plan:
    """The campaign's plan: its ``checked`` targets as their check settled them,
    the others (``pgrig plan``'s uninstalled, or none checked) from their specs;
    ``made``: the campaign's phases, when the caller made them already."""
    by_name = {t.name: t for t in checked}
    targets = {}
    for spec in campaign.targets:
        if (t := by_name.get(spec.name)) is not None:
            kind, view = t.kind, PlannedTarget.checked(t)
        else:
            kind = registry.target_kind(spec)
            view = PlannedTarget.of(spec, kind)
        probes, build, end = kind.probes_at(spec), kind.build_step(spec), kind.end_step(spec)
        targets[spec.name] = TargetPlan(view, build, probes, end)
    return Plan(campaign, targets, phases(campaign) if made is None else made)


def phases(campaign: Campaign, workloads: Sequence[Workload] | None = None) -> list[Phase]:
    """The workloads' phases, in the campaign's order (``workloads``: the
    campaign's, when the caller resolved them already)."""
    if workloads is None:
        workloads = [registry.of(w) for w in campaign.workloads]
    return [
        phase
        for spec, workload in zip(campaign.workloads, workloads, strict=True)
        for phase in workload.phases(spec, campaign.policy)
    ]


@dataclass(frozen=True)
class PlannedRun:
    target: str
    key: str
    label: str
    seconds: float


@dataclass(frozen=True)
class Expansion:
    runs: list[PlannedRun] = field(default_factory=list)
    disk: dict[str, int] = field(default_factory=dict)  # target -> bytes needed
    repeats: str = ""  # "3" or "3 to 10 (until the 95% CI is within 5%)"
    overhead_s: float = 0.0  # besides the steps: servers made and removed, the report

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    @property
    def total_s(self) -> float:
        return self.seconds + self.overhead_s


def phase_steps(
    phase: Phase, targets: Sequence[TargetView], policy: RunPolicy
) -> Iterator[tuple[TargetView, Step]]:
    """A phase's steps in the runner's order: data per target, then every point
    on every target, repeats at their minimum, the target order rotating."""
    for t in targets:
        for step in phase.data(t):
            yield t, step
    for series in phase.series:
        for rep in range(1, (policy.repeat if series.repeated else 1) + 1):
            for t in policy.order(targets, rep):
                run = series.make(t, rep)
                yield t, run
                for after in series.after(t, run):
                    yield t, after


def step_ids(campaign: Campaign) -> set[str]:
    """The keys of the plan's steps as `pgrig plan` lists them: what "n of m steps
    recorded" counts (a run's monitor and extras are records of their own, and
    "19 steps recorded" of 14 confused)."""
    return {step.id for _view, step in steps(campaign)}


def steps(campaign: Campaign) -> Iterator[tuple[TargetView, Step]]:
    return make(campaign).steps()


def disk_needs(campaign: Campaign, made: Sequence[Phase] | None = None) -> dict[str, int]:
    """Bytes each target needs at its peak (the largest phase, or the probes);
    ``made``: the campaign's phases, when the caller made them already."""
    probe_bytes = probe.disk_bytes(campaign.probes) if campaign.probes is not None else 0
    peak = max((p.disk_bytes for p in (phases(campaign) if made is None else made)), default=0)
    return {t.name: need for t in campaign.targets if (need := max(probe_bytes, peak))}


# pgrig.calibration: a finished run's seconds outside its steps (servers made,
# started and removed, the environment captured, the report written), per
# number of targets.
OVERHEAD_KIND = "run-overhead"
BASE_S = 20.0
PER_TARGET_S = 10.0


def overhead_s(campaign: Campaign) -> float:
    """Seconds a run spends besides its steps: from this study's earlier runs,
    else the machine's, else PER_TARGET_S for each target (initdb, start, stop)
    and BASE_S (the environment, the idle machine sampled, the report). The
    study's own first: its targets' kinds and its report's size differ from
    others' (seed002's two loop filesystems: 29 s; seed000's five targets: 193 s)."""
    return calibration.estimate_on(
        OVERHEAD_KIND, campaign.name, len(campaign.targets), lambda n: BASE_S + PER_TARGET_S * n
    )


def expand(campaign: Campaign) -> Expansion:
    """Every step the campaign expands to, in the order the runner executes them."""
    plan = make(campaign)
    runs = [PlannedRun(t.name, step.id, step.label, step.estimate_s) for t, step in plan.steps()]
    return Expansion(
        runs=runs,
        disk=disk_needs(campaign, plan.phases),
        repeats=campaign.policy.describe_repeats(),
        overhead_s=overhead_s(campaign) if campaign.workloads else 0.0,
    )
