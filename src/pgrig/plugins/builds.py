"""Conclusion rule ``builds``: the compared sides differ in more than what the
study set out to compare - the compiler that built each server, where the build
came from, the pgbench major that drove it.

A PostgreSQL 17 built by zonky with gcc 7.5 and driven by pgbench 15, against
Debian's 15 built with gcc 12.2, measures the compilers and the drivers too; the
conclusion that compares them has to say so. Read from what every record
stored: ``tool_versions["server"]`` (``SELECT version()`` and "; from SOURCE")
and the pgbench that ran each measured run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pgrig import registry
from pgrig.registry.report import Conclusion, Findings
from pgrig.registry.shared import PGBENCH_RUN
from pgrig.report import index
from pgrig.results import SERVER, RunRecord

# "compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit" -> gcc 12.2.0;
# "compiled by Visual C++ build 1938" and clang's "compiled by clang version 16.0.6"
COMPILER = re.compile(r"compiled by (?P<name>[A-Za-z+]+)[^,]*?(?P<version>\d+(?:\.\d+)+)\s*,")
RELEASE = re.compile(r"PostgreSQL (\d+(?:\.\d+)*)")
PGBENCH_MAJOR = re.compile(r"\(PostgreSQL\) (\d+)")


@dataclass(frozen=True)
class Side:
    """What ran on one side of the comparison, as its records say."""

    target: str
    release: str
    compiler: str
    source: str
    pgbench: str  # the major(s) of the pgbench that drove its runs

    def describe(self) -> str:
        return (
            f"{self.target} = PostgreSQL {self.release} from {self.source}, compiled by "
            f"{self.compiler}, driven by pgbench {self.pgbench}"
        )


def side(target: str, records: Sequence[RunRecord]) -> Side | None:
    study = index.read(records)
    mine = study.of_target.get(target, ())
    server = next((v for r in mine if (v := r.tool_versions.get(SERVER))), None)
    if server is None:
        return None
    build, _, source = server.partition("; from ")
    compiler = COMPILER.search(build)
    release = RELEASE.search(build)
    drivers = sorted(
        {
            m.group(1)
            for r in study.by_target(PGBENCH_RUN).get(target, ())
            if (m := PGBENCH_MAJOR.search(r.tool_versions.get("pgbench", "")))
        },
        key=int,
    )
    return Side(
        target,
        release.group(1) if release else "?",
        f"{compiler['name']} {compiler['version']}" if compiler else "an unrecorded compiler",
        source.strip() or "an unrecorded source",
        "/".join(drivers) or "(none recorded)",
    )


def builds(ev: Findings) -> list[Conclusion]:
    """One sentence when the targets' servers differ in compiler or build source,
    or their runs in the pgbench major that drove them."""
    sides = [s for t in ev.targets if (s := side(t, ev.records)) is not None]
    if len(sides) < 2:
        return []
    differ = [
        what
        for what, part in (
            ("compiler", "compiler"),
            ("build source", "source"),
            ("pgbench major", "pgbench"),
        )
        if len({getattr(s, part) for s in sides}) > 1
    ]
    if not differ:
        return []
    return [
        Conclusion(
            "builds",
            "The compared sides differ in more than what the study set out to compare: "
            + "; ".join(s.describe() for s in sides)
            + f". Their difference includes the {_words(differ)}, not the PostgreSQL "
            "release alone.",
            "as recorded with every run",
        )
    ]


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


PARTS = registry.Parts(rules=(("builds", builds),))
