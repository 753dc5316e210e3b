"""What a campaign will do and what it needs, decided before anything runs.

``steps`` walks the same phases the runner executes (``Workload.phases``,
``RunPolicy.order``), so ``expand`` lists exactly the steps the runner runs -
repeats counted at their minimum - with a time estimate; ``disk_needs`` says
how much disk each target needs; ``check_space`` refuses what cannot fit.
(The quick study, ``pgrig run`` with no file, is a campaign document made of
its options: ``pgrig.commands.quick``.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from pgrig import calibration, probe, registry
from pgrig.campaign import Campaign
from pgrig.files import check_space as check_space  # where the steps' checks find it
from pgrig.policy import RunPolicy
from pgrig.registry import AnyKind
from pgrig.registry.target import TargetSpec
from pgrig.registry.workload import Phase, TargetView
from pgrig.step import Step


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
        return cls(
            spec.name,
            {"tablespace": spec.tablespace, "index_tablespace": spec.index_tablespace},
            owned=kind.creates_server,
            storage=kind.where(spec)[0],
            load_hosts=kind.load_hosts(spec),
        )


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


def phases(campaign: Campaign) -> Iterator[Phase]:
    for spec in campaign.workloads:
        yield from registry.of(spec).phases(spec, campaign.policy)


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
    # Each target's kind resolved once: its view, its build step, its probes' place.
    kinds = [(spec, registry.target_kind(spec)) for spec in campaign.targets]
    targets = [PlannedTarget.of(spec, kind) for spec, kind in kinds]
    for t, (spec, kind) in zip(targets, kinds, strict=True):
        if (build := kind.build_step(spec)) is not None:
            yield t, build
    if campaign.probes is not None:
        # Probe by probe, target after target (as the runner does): the same
        # probe runs close in time on every target.
        per_target = [
            (t, probe.steps(campaign.probes, t.name, directory))
            for t, (spec, kind) in zip(targets, kinds, strict=True)
            if (directory := kind.probes_at(spec)) is not None
        ]
        for i in range(max((len(s) for _, s in per_target), default=0)):
            for t, probe_steps in per_target:
                if i < len(probe_steps):
                    yield t, probe_steps[i]
    there: dict[str, str] = {}  # target -> the data its last data step left
    for phase in phases(campaign):
        for view, step in phase_steps(phase, targets, campaign.policy):
            if step.leaves:
                if step.reused_s is not None and there.get(view.name) == step.leaves:
                    step = replace(step, estimate_s=step.reused_s)
                there[view.name] = step.leaves
            yield view, step
    for t, (spec, kind) in zip(targets, kinds, strict=True):
        if (end := kind.end_step(spec)) is not None:
            yield t, end


def disk_needs(campaign: Campaign) -> dict[str, int]:
    """Bytes each target needs at its peak (the largest phase, or the probes)."""
    probe_bytes = probe.disk_bytes(campaign.probes) if campaign.probes is not None else 0
    peak = max((p.disk_bytes for p in phases(campaign)), default=0)
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
    runs = [PlannedRun(t.name, step.id, step.label, step.estimate_s) for t, step in steps(campaign)]
    return Expansion(
        runs=runs,
        disk=disk_needs(campaign),
        repeats=campaign.policy.describe_repeats(),
        overhead_s=overhead_s(campaign) if campaign.workloads else 0.0,
    )
