#!/usr/bin/env python3
"""Regenerate src/pgrig/cluster/pg_params.tsv: which PostgreSQL majors know which
parameter, read from ``postgres --describe-config`` of each major's real build.

    .venv/bin/python scripts/pg_params.py            # installs what is missing first

Run it when a new major comes out (add the major to MAJORS). It downloads one build
per major into pgrig's cache (about 150 MB in all).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pgrig import pgsource, proc
from pgrig.pgsource.model import major_of, version_key
from pgrig.ui import Ui

MAJORS = ("9.5", "9.6", "10", "11", "12", "13", "14", "15", "16", "17", "18")
OUT = Path(__file__).resolve().parent.parent / "src" / "pgrig" / "cluster" / "pg_params.tsv"


def parameters(bin_dir: Path) -> set[str]:
    out = proc.run([bin_dir / "postgres", "--describe-config"], timeout=60).stdout
    return {line.split("\t", 1)[0] for line in out.splitlines() if line.strip()}


def main() -> int:
    ui = Ui()
    by_major: dict[str, set[str]] = {}
    for major in MAJORS:
        found = [i for i in pgsource.installed() if i.server and major_of(i.version) == major]
        item = max(found, key=lambda i: version_key(i.version)) if found else None
        if item is None:
            item = pgsource.install(major, ui=ui)
        by_major[major] = parameters(item.bin_dir)
        ui.ok(f"{major}: {len(by_major[major])} parameters from {item.version} ({item.source})")
    names = sorted(set().union(*by_major.values()))
    lines = [
        "# PostgreSQL parameters by major, read from postgres --describe-config of each",
        "# major's build by scripts/pg_params.py. Columns: name, first major that has it,",
        "# last major that has it (of those checked). Generated - do not edit.",
        "# majors checked: " + " ".join(MAJORS),
    ]
    for name in names:
        present = [m for m in MAJORS if name in by_major[m]]
        span = [MAJORS.index(m) for m in present]
        if span != list(range(span[0], span[-1] + 1)):
            print(f"{name} is missing from a major between {present[0]} and {present[-1]}")
            return 1
        lines.append(f"{name}\t{present[0]}\t{present[-1]}")
    OUT.write_text("\n".join(lines) + "\n")
    ui.ok(f"wrote {OUT} ({len(names)} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
