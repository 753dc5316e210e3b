"""What a plug-in adds to the report: a section of its own, conclusion rules
(sentences drawn from its records), and a workload's runs report (its sections
among the workloads', its rows of the summary, its summary figures). The
report's composition (``pgrig.report.view``, ``pgrig.report.conclusions``) asks
``pgrig.registry`` for them and never names a plug-in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pgrig.document.model import Figure, Row, Section
from pgrig.meaning import Meaning
from pgrig.results import RunRecord, Study


@dataclass(frozen=True)
class Conclusion:
    rule: str  # the rule's name, as docs/report.md lists it
    text: str  # one sentence, its numbers included
    significance: str  # how sure: "better", "the same", "not yet", "one run each: no test"


class Findings(Protocol):
    """What a plug-in's conclusion rule reads: the study's stored records (the
    report's ``Evidence`` holds more; a plug-in needs no more than these)."""

    @property
    def records(self) -> Sequence[RunRecord]: ...

    @property
    def targets(self) -> tuple[str, ...]: ...

    @property
    def baseline(self) -> str: ...


# A conclusion rule: a pure function of the stored evidence, its sentences in
# the order they are printed (after the report's own rules).
Rule = Callable[[Findings], list[Conclusion]]

# A report section of its own: the study and its records -> a section, or None
# when the study holds nothing of it.
ReportSection = Callable[[Study, Sequence[RunRecord]], Section | None]


@dataclass(frozen=True)
class Runs:
    """What a workload's runs report reads: the records of one target (of the
    study, when it has one target), each decoded once, the monitor's among
    them; the settings that change what its numbers mean; the runs' per-second
    points, each run read once for the whole report."""

    records: Sequence[RunRecord]
    target: str
    meaning: Meaning | None = None
    progress: Any = None  # pgrig.report.progress.Progress (None: in the records)


class RunsReport(Protocol):
    """A workload's part of the report where the workloads' runs are shown
    (after the probes, per target in a comparison): several workloads that
    share their result kinds share one (pgbench's TPC-B and custom scripts), and
    the report asks each distinct one once. Each answers nothing (``[]``) when
    the records hold none of its runs: a workload that did not run leaves no
    section and no row."""

    def sections(self, runs: Runs) -> list[Section]:
        """Its sections, one per workload and point as it groups them."""
        ...

    def headline_rows(self, runs: Runs) -> list[Row]:
        """Its rows of the one-target summary (Test Case, value)."""
        ...

    def sweeps(self, runs: Runs) -> bool:
        """Do its runs span several workloads, scales or durations? Then the
        one-target summary lists every point of the study, as a campaign's
        comparison of targets does, instead of the headline rows."""
        ...

    def summary_figures(self, runs: Runs) -> list[Figure]:
        """Its figures under the one-target summary (a sweep over scales)."""
        ...
