"""The ``type = "custom"`` campaign table (docs/custom.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pgrig import files
from pgrig.errors import UsageError
from pgrig.pgsource.binaries import PgBinaries
from pgrig.schema import Checked, Schema, Table, custom, integers
from pgrig.tools import pgbench
from pgrig.workloads.tpcb.spec import (
    LATENCY_LIMIT,
    QUERY_MODE,
    RATE,
    RATES,
    THREADS,
    check_pgbench,
)


@dataclass(frozen=True)
class ScriptSpec:
    path: Path
    weight: int = 1


@dataclass(frozen=True)
class CustomSpec:
    """The user's own SQL setup and pgbench scripts (seed 001's login/logout)."""

    name: str
    scripts: tuple[ScriptSpec, ...]
    setup: tuple[Path, ...] = ()
    clients: tuple[int, ...] = (1,)
    threads: int | None = None
    durations: tuple[int, ...] = (30,)
    query_mode: str = "prepared"
    defines: dict[str, str] = field(default_factory=dict)
    rate: float | None = None
    rates: tuple[float, ...] = ()  # a sweep of offered rates (pgbench -R), one run each
    latency_limit_ms: float | None = None

    kind: ClassVar[str] = "custom"


def _name(t: Table, key: str, default: object) -> str:
    name = t.get(key, str)
    if not name:
        raise t.error(key, "a custom workload needs a name", hint='add name = "login"')
    return str(name)


def _scripts(t: Table, key: str, default: object) -> tuple[ScriptSpec, ...]:
    raw = t.get(key, list)
    if not raw:
        raise t.error(
            key,
            "a custom workload needs at least one pgbench script",
            hint='scripts = [{ file = "login.sql", weight = 1 }]',
        )
    scripts = []
    for item in raw:
        if isinstance(item, str):
            item = {"file": item}
        if not isinstance(item, dict):
            raise t.error(key, f"expected a file name or {{ file, weight }}, got {item!r}")
        s = Table(item, (*t.path, key), t.ctx)
        path = s.path_value("file")
        if path is None:
            raise t.error(key, "each script needs a file")
        if (what := files.not_a_file(path)) is not None:
            raise t.error(key, f"script file {path} {what}")
        weight = s.get("weight", int, 1)
        if not 0 <= weight <= MAX_WEIGHT:  # pgbench refused 1e11 after the server was up
            raise t.error(key, f"weight {weight}: must be from 0 to {MAX_WEIGHT}")
        if not _commands(path):
            raise t.error(
                key,
                f"script file {path} holds no command (pgbench: 'empty command list')",
                hint="write the statements the clients run, e.g. SELECT 1;",
            )
        s.finish(("file", "weight"))
        scripts.append(ScriptSpec(path, weight))
    if not any(sc.weight for sc in scripts):
        raise t.error(key, "every script has weight 0: pgbench would run none of them")
    return tuple(scripts)


# pgbench's largest script weight (an int).
MAX_WEIGHT = 2**31 - 1


def _commands(path: Path) -> bool:
    """Whether a script holds anything but blank lines and SQL comments."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())


def _setup(t: Table, key: str, default: object) -> tuple[Path, ...]:
    out = []
    for item in t.get(key, list, []):
        p = Path(item).expanduser()
        p = p if p.is_absolute() else t.ctx.base / p
        if (what := files.not_a_file(p)) is not None:
            raise t.error(key, f"setup file {p} {what}")
        out.append(p)
    return tuple(out)


def _defines(t: Table, key: str, default: object) -> dict[str, str]:
    table = t.table(key)
    return {k: str(v) for k, v in (table.data.items() if table else ())}


SCHEMA = Schema(
    'type = "custom"',
    custom("name", None, "the workload's name (its column in the report)", _name,
           shown_default="(required)"),
    custom("scripts", None, 'pgbench scripts: `["a.sql"]` or `[{ file = "a.sql", weight = 3 }]`',
           _scripts, shown_default="(required)"),
    custom("setup", (), "SQL files run once with psql before the runs (tables, functions); "
           "`defines` are psql variables there (`:users`) as in the scripts", _setup,
           shown_default="`[]`"),
    integers("clients", (1,), "client counts (`-c`)"),
    THREADS,
    integers("duration", (30,), "seconds per run (`-T`)", field="durations"),
    QUERY_MODE,
    custom("defines", None, "`[workload.defines]`: pgbench `-D NAME=VALUE` variables", _defines,
           shown_default="`{}`"),
    RATE,
    RATES,
    LATENCY_LIMIT,
    also=("type",),
)  # fmt: skip


def parse(t: Table, read: Checked) -> CustomSpec:
    spec = CustomSpec(**(read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}))
    check_pgbench(t, spec.clients, spec.threads, spec.rate, spec.latency_limit_ms)
    return spec


def check_scripts(
    workload: str,
    scripts: tuple[ScriptSpec, ...],
    bins: PgBinaries,
    source: str,
    defines: dict[str, str],
    query_mode: str = "simple",
) -> None:
    """pgbench reads its scripts before it connects: what it refuses there is
    refused in the validation pass, not once the server is up (issue 33)."""
    said = pgbench.script_errors(
        bins.bin_dir, [(s.path, s.weight) for s in scripts], defines=defines, query_mode=query_mode
    )
    if said is not None:
        lines = (line.strip().removeprefix("pgbench: error: ") for line in said.splitlines())
        raise UsageError(
            f"{source}: workload {workload}: pgbench {bins.version} refuses its scripts: "
            + " / ".join(line for line in lines if line),
            hint="fix the script (pgbench's meta-commands: \\set, \\sleep, ...; "
            "see the pgbench documentation)",
        )
    for script in scripts:
        missing = undefined_variables(script.path.read_text(errors="replace"), defines)
        if missing:
            raise UsageError(
                f"{source}: workload {workload}: {script.path} uses "
                f"{', '.join(':' + n for n in missing)}, which nothing defines: pgbench sends "
                "it as NULL in prepared mode and the run measures something else",
                hint=f"\\set {missing[0]} ... in the script, or defines = {{ {missing[0]} = ... }} "
                "in the workload",
            )


# Variables pgbench defines itself (-s's scale, each client's id, the seeds).
_BUILTIN = frozenset({"scale", "client_id", "random_seed", "default_seed"})
_USE = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
_DEFINE = re.compile(r"^\s*\\(?:set|setshell)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


def undefined_variables(text: str, defines: dict[str, str]) -> list[str]:
    """The ``:name`` variables a pgbench script uses that neither it (``\\set``,
    ``\\setshell``), the workload's defines nor pgbench define. A script with
    ``\\gset`` or ``\\aset`` defines what its queries return: not judged."""
    if re.search(r"\\[ga]set\b", text):
        return []
    code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    known = _BUILTIN | set(defines) | set(_DEFINE.findall(code))
    return sorted({n for n in _USE.findall(code) if n not in known})
