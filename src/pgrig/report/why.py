"""The monitor's "why" on the first screen for every workload that is not a
pgbench curve (TPC-C, pg_basebackup, a plug-in's): per test case, each target's
most frequent verdict over its runs ("sync-on WAL / fsync bound (2 of 2 runs)").
pgbench's points have their own rules (``pgrig.report.bounds``); this one reads
the same stored verdicts for the rest, registered as a plug-in's rule is."""

from __future__ import annotations

from collections import Counter

from pgrig import registry
from pgrig.monitor.model import MONITOR
from pgrig.registry.report import Conclusion, Findings
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index
from pgrig.report.cost import case_words


def why_rule(ev: Findings) -> list[Conclusion]:
    verdicts: dict[str, dict[str, list[str]]] = {}
    study = index.read(ev.records)
    for rec in study.other_than(PGBENCH_RUN, MONITOR):
        mon = study.monitors.get(rec.key)
        if mon is None or rec.status != "ok":
            continue
        # "unknown" says nothing: the monitor saw no cause stand out
        if mon.verdict.cause != "unknown":
            per = verdicts.setdefault(case_words(rec.kind, rec.params), {})
            per.setdefault(rec.target, []).append(mon.verdict.label)
    out = []
    for case, per in verdicts.items():
        said = []
        for t in [t for t in ev.targets if t in per]:
            label, n = Counter(per[t]).most_common(1)[0]
            said.append(f"{t} {label} ({n} of {len(per[t])} run{'s' if len(per[t]) != 1 else ''})")
        out.append(
            Conclusion(
                "why",
                f"{case}: " + "; ".join(said) + " - the monitor's verdict, from the backends' "
                "wait events and the host's counters (Bottlenecks).",
                "the monitor's verdicts: no test",
            )
        )
    return out


# The rule as its own plug-in (entry point ``why``): it reads the cost section's
# case labels, and the cost section needs nothing of it.
PARTS = registry.Parts(rules=(("why", why_rule),))
