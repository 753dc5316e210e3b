"""``pgbench -i``: load the TPC-B tables, following client-side generation live.

Client-side generation prints one progress line per 100,000 rows on stderr::

    100000 of 200000 tuples (50%) done (elapsed 0.04 s, remaining 0.04 s)

server-side generation (``G``) prints none. PostgreSQL 13 and later end with::

    done in 0.23 s (drop tables 0.01 s, create tables 0.00 s,
    client-side generate 0.11 s, vacuum 0.05 s, primary keys 0.06 s).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pgrig.errors import ParseError, UsageError
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import HERE
from pgrig.results import PgbenchInit
from pgrig.tools.pgbench.program import (
    PARSE_HINT,
    TOOL,
    ClientConn,
    ConnArgs,
    check_ok,
)
from pgrig.units import MB

ROWS_PER_SCALE = 100_000
"""pgbench_accounts rows per unit of scale factor."""
# pgbench_accounts + indexes take about 15 MB per scale unit at fillfactor 100;
# 16 MB leaves room for the other tables and the free space map.
BYTES_PER_SCALE = 16 * MB


@dataclass(frozen=True)
class InitOptions:
    """How to load the pgbench tables."""

    scale: int
    generate: Literal["client", "server", "parallel"] = "client"
    partitions: int = 0  # 0 = pgbench_accounts not partitioned
    unlogged: bool = False
    tablespace: str | None = None
    index_tablespace: str | None = None
    fillfactor: int | None = None

    def __post_init__(self) -> None:
        if self.scale < 1:
            raise UsageError(f"pgbench scale must be at least 1, not {self.scale}")
        if self.generate not in ("client", "server", "parallel"):
            raise UsageError(
                f"pgbench generate must be 'client', 'server' or 'parallel', not {self.generate!r}"
            )
        if self.partitions < 0:
            raise UsageError(f"pgbench partitions must be 0 or more, not {self.partitions}")
        if self.fillfactor is not None and not 10 <= self.fillfactor <= 100:
            raise UsageError(f"pgbench fillfactor must be 10..100, not {self.fillfactor}")

    @property
    def rows(self) -> int:
        return ROWS_PER_SCALE * self.scale


def load_timeout_s(scale: int) -> float:
    """How long a load of ``scale`` may take before pgrig gives up: 3 s per
    scale unit on top of 10 minutes - generous, since a slow disk at scale
    10,000 took seed 000 over 1,000 s just to generate."""
    return 600.0 + 3.0 * scale


def init_argv(
    bin_dir: Path | str, conn: ConnArgs, opts: InitOptions, steps: str | None = None
) -> list[str]:
    """The ``pgbench -i`` command line for ``opts`` (``steps``: ``--init-steps``,
    else all of them with the generation ``opts`` asks for); pgbench in
    ``bin_dir`` as it was found (not looked for again: ``program.binary``)."""
    if steps is None:
        steps = "dtGvp" if opts.generate == "server" else "dtgvp"
    argv = [str(Path(bin_dir) / TOOL), "-i", "-s", str(opts.scale), f"--init-steps={steps}"]
    if opts.partitions:
        argv.append(f"--partitions={opts.partitions}")
    if opts.unlogged:
        argv.append("--unlogged-tables")
    if opts.tablespace:
        argv.append(f"--tablespace={opts.tablespace}")
    if opts.index_tablespace:
        argv.append(f"--index-tablespace={opts.index_tablespace}")
    if opts.fillfactor is not None:
        argv += ["-F", str(opts.fillfactor)]
    return argv + conn.args()


_INIT_PROGRESS = re.compile(
    r"^(\d+) of (\d+) tuples \(\d+%\) done \(elapsed ([\d.]+) s, remaining ([\d.]+) s\)"
)
_INIT_DONE = re.compile(r"^done in ([\d.]+) s \((.*)\)\.?$")
_INIT_STEP = re.compile(r"^(.*?) ([\d.]+) s$")


def parse_init_progress(line: str) -> tuple[int, int] | None:
    """``(done_rows, total_rows)`` from a ``pgbench -i`` progress line, else None."""
    m = _INIT_PROGRESS.match(line.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_init(text: str, opts: InitOptions) -> PgbenchInit:
    """Parse ``pgbench -i`` output (stderr; stdout may be mixed in).

    ``rows_per_s`` is rows divided by the generate step's seconds when pgbench
    reports that step (it always does from PostgreSQL 13 on), otherwise by the
    whole elapsed time. pgbench prints hundredths of a second, so a step shown
    as 0.00 s is taken as 0.01 s: tiny scales give a lower bound, not a
    division by zero.
    """
    for raw in text.splitlines():
        m = _INIT_DONE.match(raw.strip())
        if not m:
            continue
        elapsed = float(m.group(1))
        steps: dict[str, float] = {}
        for part in m.group(2).split(","):
            step = _INIT_STEP.match(part.strip())
            if not step:
                raise ParseError(
                    f"{TOOL} -i: step not understood: {part.strip()!r}", hint=PARSE_HINT
                )
            steps[step.group(1)] = float(step.group(2))
        generate_s = next((s for name, s in steps.items() if name.endswith("generate")), None)
        basis = generate_s if generate_s is not None else elapsed
        return PgbenchInit(
            scale=opts.scale,
            rows=opts.rows,
            elapsed_s=elapsed,
            rows_per_s=opts.rows / max(basis, 0.01),
            steps=steps,
            generate=opts.generate,
            partitions=opts.partitions,
            unlogged=opts.unlogged,
            tablespace=opts.tablespace,
            index_tablespace=opts.index_tablespace,
        )
    raise ParseError(
        f"{TOOL} -i printed no 'done in X s (...)' line", hint="pgrig needs pgbench 13 or later"
    )


def run_init(
    bin_dir: Path | str,
    conn: ClientConn,
    opts: InitOptions,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float | None = None,
    steps: str | None = None,
    *,
    client: Executor = HERE,
) -> tuple[PgbenchInit, str]:
    """Run ``pgbench -i`` on the ``client`` host (this machine unless told);
    return the result and the output, lines in arrival order.

    ``on_progress(done_rows, total_rows)`` follows client-side generation live;
    server-side generation reports nothing until it is over. The timeout is
    ``load_timeout_s`` unless given.
    """
    limit = timeout if timeout is not None else load_timeout_s(opts.scale)
    argv, env = init_argv(bin_dir, conn, opts, steps), conn.env(own=True)
    raw: list[str] = []  # every line, ended, in arrival order: the output kept

    def on_line(_stream: str, line: str) -> None:
        raw.append(line + "\n")
        if on_progress is not None and (point := parse_init_progress(line)):
            on_progress(*point)

    done = client.stream(
        argv,
        timeout=limit,
        on_line=on_line,
        env=env,
        check=False,
        what=f"{TOOL} -i",
    )
    check_ok(done, f"{TOOL} -i")
    return parse_init(done.stderr + done.stdout, opts), "".join(raw)
