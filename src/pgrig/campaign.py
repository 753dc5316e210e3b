"""Campaign files: a whole study written down once (TOML), checked before anything runs.

A campaign names its targets (where PostgreSQL runs: a directory on the
storage under test, or an existing server), the storage probes, the
workloads and how to run them (``pgrig.policy``). ``load(path)`` returns a
validated ``Campaign`` or raises a ``UsageError`` naming the file, the line and
the nearest valid key. Every key is declared once, in a ``Schema`` here, in
``pgrig.policy`` or in its workload's package; docs/campaigns.md shows them.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgrig import files, policy, registry
from pgrig.cluster import profiles
from pgrig.conninfo import Conn
from pgrig.errors import UsageError
from pgrig.policy import RunPolicy
from pgrig.probe import FIO_SCHEMA, PROBES_SCHEMA, ProbeSpec

# The target's spec is the target kinds' interface; named here too for the front
# doors that build campaigns.
from pgrig.registry.target import InitdbSpec as InitdbSpec
from pgrig.registry.target import TargetSpec as TargetSpec
from pgrig.registry.workload import WorkloadSpec
from pgrig.schema import (
    Context,
    Document,
    Locator,
    Schema,
    Table,
    TablePath,
    custom,
    flag,
    naming,
    path,
    text,
    type_name,
)
from pgrig.storage import kernel
from pgrig.storage.keys import LAB_SCHEMA
from pgrig.storage.target import LabSpec, instance_caps


@dataclass(frozen=True)
class Campaign:
    name: str
    source: str
    targets: tuple[TargetSpec, ...]
    probes: ProbeSpec | None = field(default_factory=ProbeSpec)
    workloads: tuple[WorkloadSpec, ...] = ()
    policy: RunPolicy = field(default_factory=RunPolicy)
    baseline: str | None = None
    # What runs it again, as the study records it (report/rerun.py): the file's
    # text, and the command line (the file by name, or the quick study's options).
    text: str = ""
    command: tuple[str, ...] = ()

    def target(self, name: str) -> TargetSpec:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)


# --------------------------------------------------------------------------
# [[target]]


def _target_name(t: Table, key: str, name: str | None) -> str:
    """The target's name, checked as a name by the schema (``naming``) when given."""
    if not name:
        raise t.error(key, "every target needs a name", hint='add name = "local-ssd"')
    return name


def _tablespace(t: Table, key: str, given: object) -> str | None:
    if given is None or isinstance(given, dict):
        return None  # a filesystem the storage lab builds (LabSpec.tablespaces)
    value = t.get(key, str)
    if value is None or "/" not in value:
        return value  # an existing tablespace's name
    return str(t.path_value(key))


def _dsn(t: Table, key: str, value: str | None) -> str | None:
    if value is not None:
        try:
            Conn.from_user(value, what="connection string")
        except UsageError as exc:
            raise t.error(key, exc.message, hint=exc.hint) from exc
    return value


def _profile(t: Table, key: str, value: str) -> str:
    """A shipped profile's name, or a file: relative to the campaign file, as
    every path of a campaign is."""
    if value.endswith(".conf") or "/" in value:
        path = str(t.path_value(key))
        # --profile ./mine (the quick study's base is .) read "unknown profile 'mine'"
        return path if "/" in path or path.endswith(".conf") else f"./{path}"
    return value


def _wal_segsize(t: Table, key: str, seg: int | None) -> int | None:
    if seg is not None and (seg < 1 or seg > 1024 or seg & (seg - 1)):
        raise t.error(key, f"{seg}: must be a power of 2 from 1 to 1024 (MB)")
    return seg


def _kernel(t: Table, key: str, table: Table | None) -> tuple[tuple[str, str], ...]:
    if table is None:
        return ()
    out = []
    for name, value in table.data.items():
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise table.error(name, f"expected a number or a string, got {type_name(type(value))}")
        if not kernel.is_kernel_setting(name):
            raise table.error(
                name,
                f"{name} is not a kernel setting on this machine (no file under /proc/sys)",
                hint="name a sysctl as sysctl -a prints it, e.g. vm.dirty_ratio",
            )
        out.append((name, str(value)))
    return tuple(out)


INITDB_SCHEMA = Schema(
    "[target.initdb]",
    text("encoding", "UTF8", "initdb `--encoding`"),
    text("locale", "C", "initdb `--locale`"),
    custom("wal_segsize", None, "initdb `--wal-segsize` in MB (the seeds use 1024)",
           _wal_segsize, kind=int, field="wal_segsize_mb"),
    flag("data_checksums", False, "initdb `--data-checksums`"),
)  # fmt: skip


def _initdb(t: Table, key: str, table: Table | None) -> InitdbSpec | None:
    if table is None:
        return None
    read = INITDB_SCHEMA.checked(table)
    return InitdbSpec(**(read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}))


LISTEN = ("socket", "tcp")


def _listen(t: Table, key: str, value: str) -> str:
    if value not in LISTEN:
        raise t.error(key, f"{value!r} is not a way to listen", hint='listen = "socket" or "tcp"')
    return value


def _kind(t: Table, key: str, name: str | None) -> str | None:
    if name is not None and name not in registry.target_kinds():
        raise t.error(
            key,
            f"{name!r} is not a target kind",
            hint=f"one of {', '.join(registry.target_kinds())}",
        )
    return name


TARGET_SCHEMA = Schema(
    "[[target]]",
    naming("name", "the column's name", _target_name, shown_default="(required)"),
    path(
        "directory",
        "the storage under test: the throwaway cluster goes into "
        "`DIRECTORY/pgrig-CAMPAIGN-TARGET/`, and the probes run there",
    ),
    custom(
        "dsn", None,
        "instead of a cluster: an existing server (URI or `key=value`); needs `--yes` for "
        "workloads, which drop `pgbench_*` tables; never restarted", _dsn, kind=str,
    ),
    path("wal_directory", "`initdb --waldir` on another disk"),
    custom(
        "tablespace", None,
        "a directory (pgrig creates a tablespace there in its cluster: seed 004's tbs1), "
        "the name of an existing tablespace, or a filesystem the lab builds for it: "
        "`{ fs = \"xfs\", size = \"2GiB\" }` ([storage lab](storage-lab.md))", _tablespace,
    ),
    custom("index_tablespace", None, "the same for indexes (seed 004's tbs2)", _tablespace),
    text("pg_bin", None, "PostgreSQL binaries of this target (compare versions: one target "
         "per version)"),
    custom("profile", "oltp", "`stock`, `oltp`, a seed's (`seed000`, `seed001`, `seed002`, "
           "`seed004`) or a path to a `.conf` file (relative to the campaign file)", _profile,
           kind=str),
    custom("set", None, "`[target.set]`: setting overrides, e.g. `synchronous_commit = \"off\"`",
           profiles.settings_of, kind=Table, field="settings"),
    custom("initdb", None, "`[target.initdb]`: see below", _initdb, kind=Table),
    custom("kernel", None, "`[target.kernel]`: kernel settings (a sysctl such as "
           "`\"vm.dirty_ratio\" = 80`, or `clocksource`) set around each of the target's "
           "steps and put back after (seed 002's dirty-page settings); root only", _kernel,
           kind=Table),
    text("os_user", None, "OS user the server runs as when pgrig is root"),
    custom("listen", "socket", "how the clients reach the cluster pgrig creates: `socket` "
           "(its private unix socket) or `tcp` (127.0.0.1 with a password, as the seeds' "
           "clients came over the network)", _listen, kind=str),
    custom("kind", None, "a registered target kind with keys of its own (docs/targets.md); "
           "without it the keys say: `directory`, `dsn` or the storage lab's", _kind, kind=str),
    also=LAB_SCHEMA.names,
)  # fmt: skip


def _gives_lab_keys(t: Table) -> bool:
    """Does the target give any of the storage lab's keys (a filesystem, a
    disk's caps or latency, a tablespace's own disk)? Only then are they read:
    a directory, a dsn or a remote host has none to find."""
    return any(key in t.data for key in LAB_SCHEMA.names) or any(
        isinstance(t.data.get(key), dict) for key in ("tablespace", "index_tablespace")
    )


def _target(t: Table, kinds: dict[str, registry.AnyKind]) -> TargetSpec:
    named = t.get("kind", str)
    kind = kinds.get(named) if named is not None else None
    if named is None:  # a kind chosen by a key of its own (a remote target's host)
        kind = next((k for k in kinds.values() if k.claim_key and k.claim_key in t.data), None)
    own = kind.schema if kind is not None else None
    # The kind's keys and the common ones in one pass of the table; the kind
    # makes its options of its part, and refuses, before the common keys' readers.
    joined = TARGET_SCHEMA.after(own) if own else TARGET_SCHEMA
    own_read, read = joined.checked(t).split(own, TARGET_SCHEMA)
    options = kind.parse(t, own_read) if kind is not None else None
    values = read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}
    if kind is not None:
        values["kind"] = kind.name
    name = values["name"]
    lab = LabSpec.from_table(t) if _gives_lab_keys(t) else None
    if lab is not None and lab.fs is not None and values["directory"] is not None:
        raise t.error(
            "directory",
            f"target {name!r} builds its own filesystem (fs = {lab.fs.fstype!r}): the cluster "
            "goes there, not into a directory",
            hint="drop directory; base = says where the filesystem's backing file goes",
        )
    if kind is not None and kind.schema is not None:  # its own keys: its check refuses
        values["initdb"] = values["initdb"] or InitdbSpec()
        return TargetSpec(**values, lab=lab, options=options)
    if kind is not None:  # a built-in kind is its keys': the same checks, the same kind
        keys = {**values, "kind": None, "initdb": values["initdb"] or InitdbSpec()}
        chosen = registry.target_kind(TargetSpec(**keys, lab=lab))
        if chosen is not kind:
            raise t.error(
                "kind",
                f"target {name!r}: the kind {kind.name!r} ({kind.summary}) is chosen by "
                f"its keys, which this target does not have (its keys say {chosen.name!r})",
                hint="drop kind, and give directory, dsn or the storage lab's keys",
            )
    if values["directory"] is None and values["dsn"] is None and (lab is None or not lab.fs):
        raise t.error(
            None,
            f"target {name!r} needs a directory, a dsn or fs",
            hint="directory = the storage under test (pgrig creates a cluster there); "
            "dsn = an existing server (a directory beside it is where probes run); "
            'fs = "xfs" with size = "8GiB": a filesystem pgrig builds on a loop device',
        )
    if lab is not None and values["dsn"] is not None:
        raise t.error(
            "dsn",
            f"target {name!r} is an existing server (dsn): the storage lab applies only to "
            "a cluster pgrig creates",
        )
    explicit_initdb = values["initdb"] is not None
    values["initdb"] = values["initdb"] or InitdbSpec()
    spec = TargetSpec(**values, lab=lab)
    tcp = spec.listen != "socket"
    if spec.dsn is not None and (spec.settings or spec.wal_directory or explicit_initdb or tcp):
        raise t.error(
            None,
            f"target {name!r} is an existing server (dsn): set, initdb, wal_directory "
            "and listen apply only to a cluster pgrig creates",
        )
    return spec


# --------------------------------------------------------------------------
# The file


def parse(text: str, *, source: str, base: Path) -> Campaign:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{source}: not valid TOML: {exc}{_twice(text, exc)}",
            hint="see docs/campaigns.md for the format",
        ) from exc
    except RecursionError:  # arrays nested hundreds deep: a RecursionError traceback
        raise UsageError(
            f"{source}: not valid TOML for pgrig: values nested too deep",
            hint="see docs/campaigns.md for the format (a campaign nests a few levels)",
        ) from None
    return read(data, Context(source=source, base=base, locator=Locator(text)))


def _twice(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """The key a duplicate-key error is about: tomllib says only "Cannot overwrite
    a value (at line 3, column 11)", naming no key."""
    if "overwrite" not in str(exc) and "declare" not in str(exc):
        return ""
    m = re.search(r"at line (\d+)", str(exc))
    lines = text.splitlines()
    if m is None or not 0 < int(m.group(1)) <= len(lines):
        return ""
    line = lines[int(m.group(1)) - 1].strip()
    key = line.strip("[]").strip() if line.startswith("[") else line.partition("=")[0].strip()
    return f": {key!r} is given twice" if key else ""


def from_options(data: Document, options: dict[TablePath, str]) -> Campaign:
    """The quick study: a campaign document made of command-line options, read
    and checked as a file's would be; ``options`` maps each (table path, key)
    to the option it came from, so that an error names what the user typed."""
    ctx = Context(source="command line", base=Path(), locator=Locator(""), options=options)
    return read(data, ctx)


def read(data: Document, ctx: Context) -> Campaign:
    """A campaign document (parsed TOML, or the quick study's options), checked."""
    source = ctx.source
    top = Table(data, (), ctx)
    campaign_table = top.table("campaign")
    if campaign_table is None:
        raise UsageError(
            f"{source}: no [campaign] table", hint='start the file with [campaign] and name = "..."'
        )
    header = policy.parse(campaign_table)
    name, baseline, run_policy = header.name, header.baseline, header.policy
    ctx.inventory = header.inventory
    # What the tables below name, asked for once: the registered target kinds
    # and workload types (a broken plug-in is refused here, before its tables)
    kinds, types = registry.target_kinds(), registry.workloads()

    targets = []
    raw_targets = top.get("target", list, [])
    if not raw_targets:
        raise UsageError(
            f"{source}: no [[target]]",
            hint='add [[target]] with name = "..." and directory = "/data01"',
        )
    seen: dict[str, int] = {}
    for i, item in enumerate(raw_targets):
        r = Table(item, ("target", i), ctx)
        spec = _target(r, kinds)
        if spec.name in seen:
            raise r.error(
                "name",
                f"target name {spec.name!r} is used twice (also target {seen[spec.name] + 1})",
                hint="give each target its own name",
            )
        seen[spec.name] = i
        targets.append(spec)

    if header.instance_iops is not None or header.instance_mbps is not None:
        targets = with_instance(targets, header, campaign_table)
    if header.versions or header.axes:
        targets = variants(targets, header.versions, header.axes, campaign_table)
        seen = {t.name: i for i, t in enumerate(targets)}
    ctx.targets = tuple(seen)

    probes: ProbeSpec | None = ProbeSpec()
    probe_value = top.get("probes", (dict, bool), True)
    if probe_value is False:
        probes = None
    elif isinstance(probe_value, dict):
        pt = Table(probe_value, ("probes",), ctx)
        read = PROBES_SCHEMA.checked(pt)
        probes = ProbeSpec(**(read.values | {k.attr: k.read(pt, k.name, v) for k, v in read.owned}))

    workloads: list[WorkloadSpec] = []
    for i, item in enumerate(top.get("workload", list, [])):
        r = Table(item, ("workload", i), ctx)
        workload = types[r.choice("type", tuple(types), "tpcb")]
        workloads.append(workload.parse(r, workload.schema.checked(r)))
    names = [w.name for w in workloads]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise UsageError(
            f"{source}: workload name {sorted(dupes)[0]!r} is used twice",
            hint="give each [[workload]] its own name",
        )
    top.finish(("campaign", "target", "probes", "workload"))
    if baseline is not None and baseline not in seen:
        raise campaign_table.error(
            "baseline",
            f"baseline target {baseline!r} is not in the campaign",
            hint=f"targets: {', '.join(seen)}",
        )
    return Campaign(
        name=name,
        source=source,
        targets=tuple(targets),
        probes=probes,
        workloads=tuple(workloads),
        policy=run_policy,
        baseline=baseline or targets[0].name,
    )


def with_instance(
    targets: list[TargetSpec], header: policy.Header, where: Table
) -> list[TargetSpec]:
    """``[campaign] instance_iops/instance_mbps``: the instance cap of each target
    with an emulated disk that gives none of its own. Each target stays an
    instance of its own (targets are compared, not run on one instance)."""
    iops, mbps = header.instance_iops, header.instance_mbps
    caps = instance_caps(iops, mbps)
    out = [t if t.lab is None or not t.lab.emulated or t.lab.instance is not None
           else replace(t, lab=replace(t.lab, instance=caps)) for t in targets]  # fmt: skip
    if not any(t.lab is not None and t.lab.emulated for t in targets):
        raise where.error(
            "instance_iops" if iops is not None else "instance_mbps",
            "no target has an emulated disk to share an instance cap",
            hint='give a target latency = "essd-pl3" (the native latency layer applies the '
            "cap), or drop the key",
        )
    return out


def variants(
    targets: list[TargetSpec],
    versions: tuple[str, ...],
    axes: tuple[policy.Axis, ...],
    where: Table,
) -> list[TargetSpec]:
    """The versions axis and the settings axes: each target once per version and
    combination of settings, version after version (so interleaving alternates
    them), each with that version's binaries and those settings."""
    for t in targets:
        if t.dsn is not None:
            raise where.error(
                "versions" if versions else "axes",
                f"target {t.name!r} is an existing server (dsn): pgrig cannot change its "
                "version or settings, so every variant would be the same server",
                hint="give the target a directory, so that pgrig creates each variant's cluster",
            )
        if versions and t.pg_bin is not None:
            raise where.error(
                "versions",
                f"target {t.name!r} names pg_bin {t.pg_bin!r}: the versions axis picks the "
                "binaries",
                hint="drop pg_bin from the target, or drop versions",
            )
        both = [name for name, _ in axes if name in t.settings or name in dict(t.kernel)]
        if both:
            raise where.error(
                "axes",
                f"target {t.name!r} sets {both[0]} in [target.set] or [target.kernel], and "
                "the axes vary it",
                hint=f"drop {both[0]} from the target or from axes",
            )
    combos = list(itertools.product(*(values for _, values in axes)))
    out = []
    for version in versions or (None,):
        for combo in combos:
            chosen = tuple((name, value) for (name, _), value in zip(axes, combo, strict=True))
            for t in targets:
                parts = [t.name] if len(targets) > 1 else []
                parts += [f"pg{version}"] if version is not None else []
                parts += [f"{name}-{_name_part(value)}" for name, value in chosen]
                sysctls = tuple((n, v) for n, v in chosen if kernel.is_kernel_setting(n))
                out.append(
                    replace(
                        t,
                        name="-".join(parts),
                        pg_bin=version if version is not None else t.pg_bin,
                        settings={
                            **t.settings,
                            **{n: v for n, v in chosen if (n, v) not in sysctls},
                        },
                        axes=chosen,
                        kernel=(*t.kernel, *sysctls),
                    )
                )
    names: dict[str, TargetSpec] = {}
    for v in out:
        if v.name in names:  # e.g. axis values "a,b" and "a, b", or a target named like a variant
            raise where.error(
                "axes" if axes else "versions",
                f"two variants would both be named {v.name!r} (settings {dict(names[v.name].axes)} "
                f"and {dict(v.axes)}), and their results would mix",
                hint="make the axis values, or the target names, differ in letters or digits",
            )
        names[v.name] = v
    return out


def _name_part(value: str) -> str:
    """A setting's value as part of a target name (letters, digits, . _ -)."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", value).strip("_") or "empty"


def load(path: Path) -> Campaign:
    if (why := files.not_a_file(path)) is not None:
        raise UsageError(f"campaign file {path} {why}", hint="give the campaign's TOML file")
    try:
        # utf-8-sig: a byte-order mark (Windows editors) is not a statement
        content = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read campaign file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"campaign file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})",
            hint="a campaign is a TOML text file; see docs/campaigns.md",
        ) from exc
    camp = parse(content, source=str(path), base=path.resolve().parent)
    return dataclasses.replace(camp, text=content, command=("pgrig", "run", path.name))


def key_tables() -> dict[str, Schema]:
    """Every table a campaign file can hold, by the name ``pgrig keys NAME``
    takes, in the order the docs show them: pgrig's own tables, each workload's
    (by its type) and each target kind's with keys of its own (by its name)."""
    tables = {
        "campaign": policy.SCHEMA,
        "target": TARGET_SCHEMA,
        "lab": LAB_SCHEMA,
        "initdb": INITDB_SCHEMA,
        "probes": PROBES_SCHEMA,
        "fio": FIO_SCHEMA,
    }
    tables |= {name: w.schema for name, w in registry.workloads().items()}
    for name, kind in registry.target_kinds().items():
        if kind.schema is not None:
            tables.setdefault(name, kind.schema)
    return tables


def schemas() -> list[Schema]:
    """Every table a campaign file can hold, in the order the docs show them."""
    return list(key_tables().values())
