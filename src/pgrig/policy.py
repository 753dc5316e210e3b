"""How measured runs are repeated, warmed up and reset: the ``[campaign]`` run
policy, and the one place that decides the order targets run in and when the
repeats may stop - for ``pgrig plan`` and the runner alike."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from pgrig import files, stats
from pgrig.cluster import profiles
from pgrig.schema import (
    Schema,
    Table,
    choice,
    custom,
    flag,
    integer,
    name_problem,
    naming,
    number,
    shown_name,
    text,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RunPolicy:
    repeat: int = 1
    # "repeat until the 95% confidence interval is within X% of the mean", up to max_repeat
    until_ci_pct: float | None = None
    max_repeat: int = 10
    # "repeat until the 95% interval of the difference to the baseline (of the
    # medians, in % of the baseline's) is within +-X%", up to max_repeat and the
    # plan's time for max_repeat repeats (pyperf and hyperfine size their runs so)
    until_diff_pct: float | None = None
    # "repeat until each target's comparison with the baseline is decided"
    # (better, worse or the same: stats.Comparison), up to max_repeat and the
    # plan's time: Pinpoint's "add repeats until different or the same"
    until_decided: bool = False
    warmup: int | str = 0  # seconds, or "auto": until per-second tps is steady
    warmup_max_s: int = 120  # "auto" gives up after this long
    checkpoint: bool = True
    reset: str = "reuse"  # reuse | restore
    interleave: bool = True
    monitor: bool = True  # sample host and server during every measured run
    wait_quiet_s: float = 0.0  # before a measured run, wait up to this long for a quiet machine
    concurrent: bool = False  # each point on every target at once (targets on their own hosts)
    latency_target: str | None = None  # "p99 <= 5 ms": the report's tps under it

    def order(self, targets: Sequence[T], rep: int) -> list[T]:
        """Rotate the target order every repetition, so that slow drift of the
        machine favours no target."""
        items = list(targets)
        if not self.interleave or len(items) < 2:
            return items
        shift = (rep - 1) % len(items)
        return items[shift:] + items[:shift]

    @property
    def adaptive(self) -> bool:
        """Do repeats go on until a precision is met (``until_ci_pct``, ``until_diff_pct``)?"""
        return (
            self.until_ci_pct is not None or self.until_diff_pct is not None or self.until_decided
        )

    def more(
        self,
        rep: int,
        samples: Sequence[Sequence[float]],
        *,
        baseline: int = 0,
        elapsed_s: float | None = None,
        rep_estimate_s: float = 0.0,
    ) -> bool:
        """After repetition ``rep``: run another? ``samples`` holds each target's
        values of the point's metric so far (``baseline``: the baseline's index).
        ``elapsed_s``: the point's seconds so far; with ``rep_estimate_s`` (the
        plan's seconds for one repetition) another repetition must end within
        the plan's time for ``max_repeat`` of them."""
        if rep < self.repeat:
            return True
        if not self.adaptive or rep >= self.max_repeat:
            return False
        # until = "decided" goes on to max_repeat whatever the plan's estimate: a
        # loaded machine runs slower than planned, and that is when a decision
        # needs more runs (issue 39: 3 runs a side stopped at the plan's time).
        spent = elapsed_s is not None and rep_estimate_s > 0 and not self.until_decided
        if spent and (elapsed_s or 0.0) + rep_estimate_s > self.max_repeat * rep_estimate_s:
            return False  # the plan's time for this point is spent
        if self.until_ci_pct is not None and not all(self.ci_ok(v) for v in samples):
            return True
        if self.until_decided and not self.decided(samples, baseline):
            return True
        return self.until_diff_pct is not None and not self.diff_ok(samples, baseline)

    def decided(self, samples: Sequence[Sequence[float]], baseline: int = 0) -> bool:
        """Is every target's comparison with the baseline decided (better, worse
        or the same within the margin), the study's comparisons of this point
        decided together? One target: nothing to decide."""
        if not samples or baseline >= len(samples):
            return False
        base = samples[baseline]
        others = [v for i, v in enumerate(samples) if i != baseline]
        if not others:
            return True  # one target: nothing to decide
        if not base or not all(others):
            return False  # a side without a figure yet
        found = stats.adjust([stats.decide(base, v) for v in others])
        return all(c.verdict != stats.NOT_YET for c in found)

    def diff_ok(self, samples: Sequence[Sequence[float]], baseline: int = 0) -> bool:
        """Is every target's difference to the baseline known to within
        ``until_diff_pct`` (half the width of its bootstrap 95% interval)? With one
        target: the difference another set of as many runs could show."""
        assert self.until_diff_pct is not None
        if not samples or baseline >= len(samples):
            return False
        base = samples[baseline]
        others = [v for i, v in enumerate(samples) if i != baseline] or [base]
        for values in others:
            # the decision procedure's own interval, so "precise enough" and the
            # verdict printed later rest on one computation
            bounds = stats.decide(base, values).log_interval()
            if (
                bounds is None
                or math.expm1((bounds[1] - bounds[0]) / 2) * 100 > self.until_diff_pct
            ):
                return False
        return True

    def ci_ok(self, values: Sequence[float]) -> bool:
        assert self.until_ci_pct is not None
        if len(values) < 2:
            return False
        mean = statistics.fmean(values)
        if mean <= 0:
            return False
        return stats.ci95_half_width(list(values)) / mean * 100 <= self.until_ci_pct

    def run_label(self, repeat: int) -> str:
        """', run 2 of 3' for a progress line; '' when points run once."""
        if self.adaptive:
            return f", run {repeat}"
        return f", run {repeat} of {self.repeat}" if self.repeat > 1 else ""

    def run_seconds(self, duration: float, restore_s: float = 0.0) -> float:
        """A measured run's planned seconds under this policy: the warm-up, the
        run, the CHECKPOINT, and ``restore_s`` when the data is restored before it."""
        warm = 15.0 if self.warmup == "auto" else float(self.warmup or 0)
        return duration + warm + 2 + (restore_s if self.reset == "restore" else 0.0)

    def describe_repeats(self) -> str:
        if not self.adaptive:
            return str(self.repeat)
        until = []
        if self.until_ci_pct is not None:
            until.append(f"the 95% confidence interval is within {self.until_ci_pct:g}%")
        if self.until_decided:
            until.append("each comparison with the baseline is decided")
        if self.until_diff_pct is not None:
            until.append(
                f"the 95% interval of each difference to the baseline is within "
                f"±{self.until_diff_pct:g}%"
            )
        return f"{self.repeat} to {self.max_repeat} (until {' and '.join(until)})"


@dataclass(frozen=True)
class Repeat:
    """The campaign's ``repeat``: a count, or a precision to reach within bounds."""

    repeat: int = 1
    until_ci_pct: float | None = None
    max_repeat: int = 10
    until_diff_pct: float | None = None
    until_decided: bool = False


def _repeat(t: Table, key: str, value: int | Table | Repeat) -> Repeat:
    if isinstance(value, Repeat):
        return value  # not given: the default
    if isinstance(value, int):
        if value < 1:
            raise t.error(key, f"{value}: at least 1")
        return Repeat(value)
    rr = value
    until = rr.get("until_ci_pct", float)
    diff = rr.get("until_diff_pct", float)
    for name, given in (("until_ci_pct", until), ("until_diff_pct", diff)):
        if given is not None and given <= 0:
            raise rr.error(name, f"{given}: a precision in %, more than 0")
    goal = rr.get("until", str)
    if goal is not None and goal != "decided":
        raise rr.error("until", f"{goal!r}: the one goal is \"decided\"",
                       hint='repeat = { until = "decided", min = 3, max = 12 }')  # fmt: skip
    if until is None and diff is None and goal is None:
        raise rr.error(
            "until_ci_pct",
            "give the wanted precision in %: until_ci_pct (the 95% confidence interval of "
            "each target's mean) or until_diff_pct (the 95% interval of each difference to "
            'the baseline), or until = "decided" (each comparison with the baseline better, '
            "worse or the same)",
            hint="repeat = { until_diff_pct = 5, min = 3, max = 10 }",
        )
    count = rr.get("min", int, 3)
    max_repeat = rr.get("max", int, 10)
    if (diff is not None or goal is not None) and count < stats.MIN_RUNS:
        raise rr.error(
            "min",
            f"{count}: a difference to the baseline needs min >= {stats.MIN_RUNS} (a verdict "
            f"needs {stats.MIN_RUNS} runs a side)",
        )
    if count < 2 or max_repeat < count:
        raise rr.error("min", "need 2 <= min <= max")
    rr.finish(("until_ci_pct", "until_diff_pct", "until", "min", "max"))
    return Repeat(count, until, max_repeat, diff, goal is not None)


# "p99 <= 5 ms": a percentile pgbench's log gives, and a limit in milliseconds
LATENCY_TARGET = re.compile(r"\s*p(50|90|95|99)\s*<=?\s*(\d+(?:\.\d*)?|\.\d+)\s*ms\s*")


@dataclass(frozen=True)
class LatencyTarget:
    """The latency a DBA holds a server to: the report gives the throughput each
    target reached while its percentile stayed within the limit."""

    percentile: int  # 50, 90, 95 or 99
    limit_ms: float

    @classmethod
    def parse(cls, text: str) -> LatencyTarget:
        """'p99 <= 5 ms' (also '<', spaces optional); ValueError naming the form."""
        m = LATENCY_TARGET.fullmatch(text)
        if m is None or float(m.group(2)) <= 0:
            raise ValueError(
                f"{text!r}: a percentile of pgbench's latency and a limit above 0 ms, "
                'as "p99 <= 5 ms" (p50, p90, p95 or p99)'
            )
        return cls(int(m.group(1)), float(m.group(2)))

    @property
    def text(self) -> str:
        return f"p{self.percentile} <= {self.limit_ms:g} ms"


def _latency_target(t: Table, key: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return LatencyTarget.parse(text).text
    except ValueError as exc:
        raise t.error(key, str(exc), hint='latency_target = "p99 <= 5 ms"') from None


def _warmup(t: Table, key: str, warmup: int | str) -> int | str:
    if isinstance(warmup, str) and warmup != "auto":
        raise t.error(key, f'{warmup!r}: seconds, or "auto" (until tps is steady)')
    if isinstance(warmup, int) and warmup < 0:
        raise t.error(key, f"{warmup}: 0 or more seconds")
    return warmup if isinstance(warmup, str) else int(warmup)


def _versions(t: Table, key: str, values: list[object] | tuple[str, ...]) -> tuple[str, ...]:
    for v in values:
        if not isinstance(v, str) or not re.fullmatch(r"\d+(\.\d+){0,2}", v):
            raise t.error(key, f'{v!r}: a version as a string, e.g. "9.6", "15" or "9.6.24"')
    if len(set(values)) != len(values):
        raise t.error(key, "a version is listed twice")
    return tuple(str(v) for v in values)


Axis = tuple[str, tuple[str, ...]]


def _axes(t: Table, key: str, table: Table | tuple[Axis, ...]) -> tuple[Axis, ...]:
    if not isinstance(table, Table):  # not given: the default
        return ()
    out: list[Axis] = []
    for given, values in table.data.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", given):
            raise table.error(given, f"{given!r} is not a PostgreSQL parameter name")
        name = profiles.setting_name(given, partial(table.where, given))
        if name in dict(out):
            raise table.error(given, f"{name} is given twice (PostgreSQL's names ignore case)")
        if not isinstance(values, list) or not values:
            raise table.error(
                given,
                f"{name}: give the values to compare as a list",
                hint=f'{name} = ["a", "b"] (one value everywhere belongs in [target.set])',
            )
        texts: list[str] = []
        for v in values:
            if isinstance(v, bool):
                texts.append("on" if v else "off")
            elif isinstance(v, int | float | str) and str(v).strip():
                texts.append(str(v))
            else:
                raise table.error(given, f"{v!r}: a setting's value (string or number)")
        if len(set(texts)) != len(texts):
            raise table.error(given, f"{name}: a value is listed twice")
        out.append((name, tuple(texts)))
    return tuple(out)


def _name(t: Table, key: str, name: str | None) -> str:
    """The campaign's name, checked as a name by the schema (``naming``) when
    given and not empty."""
    if name is None:
        raise t.error(
            None, "the campaign has no name (its study id)", hint='add name = "seed000-storage"'
        )
    if not name:
        raise t.error(
            key, f"{shown_name(name)}: {name_problem(name)}", hint='name = "seed000-storage"'
        )
    return name


def _inventory(t: Table, key: str, path: Path | None) -> Path | None:
    """The inventory file, refused when it is none: a campaign without remote
    targets never read it, and a mistyped name went unsaid."""
    if path is not None and (why := files.not_a_file(path)) is not None:
        raise t.error(key, f"the inventory {path} {why}", hint="give an Ansible inventory file")
    return path


SCHEMA = Schema(
    "[campaign]",
    naming("name", "the study id: letters, digits, `.`, `_`, `-`", _name,
           example='"seed000-storage"', shown_default="(required)"),
    text("baseline", None, "the column the others are compared with",
         shown_default="first target"),
    custom(
        "versions", (),
        "PostgreSQL versions as an axis, e.g. `[\"9.6\", \"15\", \"18\"]`: every target runs "
        "once per version (named `TARGET-pgVERSION`, or `pgVERSION` for one target), each on "
        "its own throwaway cluster with the same profile; versions not installed are "
        "installed by `pgrig pg install` on demand ([versions](versions.md))",
        _versions, kind=list, shown_default="`[]`",
    ),
    custom(
        "axes", (),
        "settings as axes, e.g. `{ io_method = [\"sync\", \"worker\"], io_workers = [1, 4] }`: "
        "every target (and version) runs once per combination of values, named "
        "`TARGET-pgVERSION-io_method-worker-io_workers-4` (parts left out where there is "
        "one target or no versions), each on its own cluster with the same profile plus "
        "those settings. A value a version cannot take is refused before anything runs "
        "([versions](versions.md#settings-as-axes))",
        _axes, kind=Table, shown_default="`{}`",
    ),
    custom(
        "inventory", None,
        "an Ansible inventory (INI or YAML) naming the hosts of remote targets "
        "(`host = \"db1\"`, `load_hosts = [\"c1\", \"c2\"]`; [hosts](hosts.md))",
        _inventory, kind=Path,
    ),
    custom(
        "repeat", Repeat(),
        "runs of every point; or `{ until_ci_pct = 5, min = 3, max = 10 }`: repeat until the "
        "95% confidence interval of the mean of the point's headline figure (tps, tpmC) is "
        "within 5% (for every target), at least `min`, at most `max` times; or "
        "`{ until_diff_pct = 5, min = 3, max = 10 }`: until the bootstrap 95% interval of "
        "each target's difference to the baseline (medians, % of the baseline's) is within "
        "±5% (one target: the difference another set of as many runs could show), and never "
        "past the plan's time for `max` repeats of the point; or `{ until = \"decided\", "
        "min = 3, max = 12 }`: until each target's comparison with the baseline is "
        "decided (better, worse or the same within 5%; [verdicts](report.md#verdicts)) "
        "([adaptive repeats](campaigns.md#adaptive-repeats))",
        _repeat, kind=(int, Table), shown_default="`1`",
    ),
    custom(
        "warmup", 0,
        "seconds of unrecorded pgbench before each measured run, or `\"auto\"`: until "
        "per-second tps is steady (last 5 s within a 3% coefficient of variation)",
        _warmup, kind=(int, str),
    ),
    integer("warmup_max", 120, 'seconds after which `warmup = "auto"` gives up',
            field="warmup_max_s"),
    flag("checkpoint", True, "`CHECKPOINT` before each measured run, as the seeds do"),
    choice(
        "reset", ("reuse", "restore"), "reuse",
        '`"reuse"` the loaded data (the seeds), or `"restore"`: keep a pristine copy after '
        "loading (`CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY`) and restore it before "
        "every measured run, so run 5 does not inherit run 4's bloat. Only in clusters pgrig "
        "creates",
    ),
    flag(
        "monitor", True,
        "sample the host and the server once a second during every measured run and record "
        "the bottleneck verdict ([monitor](monitor.md))",
    ),
    number(
        "wait_quiet", 0.0,
        "seconds to wait, before each measured run, for other work on the machine to fall "
        "under 10% of the CPUs; `0`: do not wait (disturbed runs are marked and not counted "
        "towards `until_ci_pct` either way)",
        field="wait_quiet_s",
    ),
    flag(
        "concurrent", False,
        "run each point on every target at the same time instead of in turn: for targets "
        "on machines of their own (`host = ...`, [hosts](hosts.md#many-machines-in-one-study)); "
        "targets that share a machine are refused",
    ),
    custom(
        "latency_target", None,
        "a latency the servers are held to, e.g. `\"p99 <= 5 ms\"` (p50, p90, p95 or p99 of "
        "pgbench's per-transaction log; TPC-C: New-Order's): the report gives each target's "
        "highest tps (tpmC) at a point - a client count, or an offered rate of a workload's "
        "`rates` sweep - whose median percentile stayed within it, and with a sweep says it "
        "on the first screen ([report](report.md#throughput-under-a-latency-target))",
        _latency_target, kind=str,
    ),
    flag(
        "interleave", True,
        "run each point on every target before the next point, rotating the target order "
        "every repeat, so slow drift of the machine favours no target",
    ),
    number(
        "instance_iops", None,
        "the instance cap of every target with an emulated disk (`latency`), as its own "
        "`instance_iops` says it (which overrides this): each target is an instance of its "
        "own, whose disks share it ([storage lab](storage-lab.md))", above=0,
    ),
    number("instance_mbps", None, "the same for MB/s (`instance_mbps`)", above=0),
)  # fmt: skip


@dataclass(frozen=True)
class Header:
    """The ``[campaign]`` table: who the study is, and how it runs."""

    name: str
    baseline: str | None
    versions: tuple[str, ...]
    policy: RunPolicy
    axes: tuple[Axis, ...] = ()
    inventory: Path | None = None  # the hosts of remote targets
    # every emulated target's instance cap, unless the target gives its own
    instance_iops: float | None = None
    instance_mbps: float | None = None


def parse(table: Table) -> Header:
    read = SCHEMA.checked(table)
    values = read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}
    name, baseline, versions = values.pop("name"), values.pop("baseline"), values.pop("versions")
    axes, inventory = values.pop("axes"), values.pop("inventory")
    iops, mbps = values.pop("instance_iops"), values.pop("instance_mbps")
    repeat: Repeat = values.pop("repeat")
    values.update(dataclasses.asdict(repeat))
    return Header(name, baseline, versions, RunPolicy(**values), axes, inventory, iops, mbps)
