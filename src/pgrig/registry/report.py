"""What a plug-in adds to the report: a section of its own, and conclusion rules
(sentences drawn from its records). The report's composition
(``pgrig.report.view``, ``pgrig.report.conclusions``) asks ``pgrig.registry``
for them and never names a plug-in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pgrig.document.model import Section
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
    def records(self) -> tuple[RunRecord, ...]: ...

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
