"""The SQL files and pgbench scripts of the TPC-C workload, loaded by name."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pgrig.workloads.tpcc.model import TRANSACTIONS

_PACKAGE = "pgrig.workloads.tpcc"
_REPEAT = re.compile(r"^--@repeat (\d+) (\d+)\s*$")


def sql(name: str, server_version: int | None = None) -> str:
    """``sql/<name>.sql`` - or, for a server older than N (``server_version_num``),
    ``sql/<name>.beforeN.sql`` where one exists (the oldest N above the server's
    wins). Functions drop ``PARALLEL SAFE`` before 9.6, which has no such clause."""
    folder = resources.files(_PACKAGE) / "sql"
    chosen = f"{name}.sql"
    if server_version is not None:
        older = sorted(
            int(m.group(1))
            for f in folder.iterdir()
            if (m := re.fullmatch(rf"{re.escape(name)}\.before(\d+)\.sql", f.name))
        )
        chosen = next((f"{name}.before{n}.sql" for n in older if server_version < n), chosen)
    text = (folder / chosen).read_text()
    if server_version is not None and server_version < PARALLEL_FROM:
        text = text.replace(" PARALLEL SAFE", "")
    return text


PARALLEL_FROM = 90600  # CREATE FUNCTION ... PARALLEL SAFE


def statements(name: str) -> list[str]:
    """The ``;``-separated statements of ``sql/<name>.sql``, comments removed (for
    files whose statements run one by one, in parallel connections)."""
    kept = [line for line in sql(name).splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(kept).split(";") if s.strip()]


def expand(text: str) -> str:
    """Write out ``--@repeat A B`` ... ``--@end`` blocks for @N = A..B (``@NN``: two
    digits): pgbench has no loops, and New-Order has up to 15 lines."""
    out: list[str] = []
    block: list[str] | None = None
    bounds = (0, 0)
    for line in text.splitlines():
        if m := _REPEAT.match(line):
            block, bounds = [], (int(m.group(1)), int(m.group(2)))
        elif line.strip() == "--@end" and block is not None:
            for n in range(bounds[0], bounds[1] + 1):
                out += [b.replace("@NN", f"{n:02d}").replace("@N", str(n)) for b in block]
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def script(mode: str, name: str) -> str:
    return expand((resources.files(_PACKAGE) / "scripts" / mode / f"{name}.sql").read_text())


def write_scripts(mode: str, directory: Path) -> list[Path]:
    """The five pgbench scripts of ``mode``, written to ``directory`` in the order of
    ``TRANSACTIONS`` (pgbench numbers scripts by their ``-f`` order)."""
    paths = []
    for name in TRANSACTIONS:
        path = directory / f"tpcc_{mode}_{name}.sql"
        path.write_text(script(mode, name))
        paths.append(path)
    return paths
