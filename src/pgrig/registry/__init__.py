"""The plug-in interface: the tables of every workload, target kind, host
executor, step action, result kind, report section, conclusion rule and CLI
command pgrig knows, filled at run time.

Nothing here names a plug-in. The tables are filled by the ``pgrig.plugins``
entry points (``importlib.metadata``, as pytest's ``pytest11``): pgrig's own
workloads, target kinds, probes, monitor, storage lab and executors are declared
in its pyproject.toml exactly as a third-party package declares its own::

    [project.entry-points."pgrig.plugins"]
    example = "pgrig_example.workload:WORKLOAD"

An entry point names a ``Workload``, a ``TargetKind``, a ``click.Command`` or
the ``Parts`` of a plug-in that is neither (registered as they are: data the
registry reads, nothing it calls back), or a module (or function) whose
``register()`` adds its parts through the ``register*`` functions below. The
tables load on first use (``load``), so the command line, library callers and
tests see the same plug-ins. Tests add toy
plug-ins with ``register(...)`` and take them away with ``unregister(...)``.

As pytest treats its plug-ins (pluggy): a part is checked when it registers
(a workload's schema, kinds, actions and rules; a target kind's; ``pgrig.registry.checks``)
and refused with an error naming the entry point; a plug-in registers whole or
not at all (a clash or a bad part leaves nothing of it behind); a step action is
named ``NAMESPACE.verb`` and a namespace is the plug-in's that used it first
(another may reuse the very same function, not add its own there); every part
remembers its plug-in (``pgrig plugins`` lists them, ``plugins()``); and a plug-in
can be left out for one run (``PGRIG_DISABLE_PLUGINS=NAME,...`` or ``pgrig -p no:NAME``).

The interfaces: ``pgrig.registry.workload`` (a workload), ``pgrig.registry.target``
(a target kind, ``TargetSpec``), ``pgrig.registry.report`` (a report section, a
conclusion rule); docs/workloads.md and docs/targets.md show how to add one.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import inspect
import os
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from pgrig.errors import PgrigError, UsageError
from pgrig.hosts.executor import Executor
from pgrig.registry import checks
from pgrig.registry.parts import ActionMaker, Parts
from pgrig.registry.report import ReportSection, Rule, RunsReport
from pgrig.registry.target import TargetKind, TargetSpec
from pgrig.registry.workload import Workload, WorkloadSpec
from pgrig.results import Decoded, ResultKind, RunRecord, typed
from pgrig.step import Action, Call, Prepare

GROUP = "pgrig.plugins"  # the entry points' group
OWN = "pgrig"  # the distribution whose entry points load first, in their order

AnyKind = TargetKind[object, object]

# The tables, in the order their plug-ins registered; workloads and target kinds
# are read in their ``order`` (without ``kind = ...`` a target is the first kind
# that claims it; the report shows their sections in that order).
_WORKLOADS: dict[str, Workload] = {}
_TARGET_KINDS: dict[str, AnyKind] = {}
_ACTIONS: dict[str, ActionMaker] = {}
_RESULT_KINDS: dict[str, ResultKind] = {}  # besides workloads' and target kinds' own
_EXECUTORS: dict[str, type[Executor]] = {}
_SECTIONS: dict[str, ReportSection] = {}  # besides workloads' and target kinds' own
_RULES: dict[str, Rule] = {}  # besides workloads' own
_COMMANDS: dict[str, click.Command] = {}
_loading: list[bool] = []  # one entry once loading started (not twice, not recursively)
# The error that stopped loading: raised again on every later use, so a caller that
# caught it never reads tables holding only the plug-ins loaded before it.
_refused: list[PgrigError] = []

DISABLE_ENV = "PGRIG_DISABLE_PLUGINS"  # NAME,NAME: entry points left out of this run
DIRECT = "(registered by a call)"  # the owner of parts registered outside an entry point


@dataclass(frozen=True)
class Plugin:
    """One entry point as ``pgrig plugins`` lists it: where it comes from, what
    it registered, or why it was left out."""

    name: str  # the entry point's name: what -p no:NAME and PGRIG_DISABLE_PLUGINS take
    value: str  # module:attribute
    dist: str  # the package that declares it, and its version
    parts: tuple[tuple[str, str], ...] = ()  # (what, name): ("workload", "tpcb")
    disabled: str | None = None  # why it was not loaded


_PLUGINS: dict[str, Plugin] = {}  # in load order
# (what, name) -> the plug-in that registered it; "namespace" entries own the
# actions' namespaces
_OWNERS: dict[tuple[str, str], str] = {}
_DISABLED: dict[str, str] = {}  # name -> why (the option or the variable that said so)
_current: list[tuple[str, list[tuple[str, str]]]] = []  # the plug-in registering now

# Every table with the word its errors and listing use for its parts.
_TABLES: tuple[tuple[str, MutableMapping[str, Any]], ...] = (
    ("workload", _WORKLOADS),
    ("target kind", _TARGET_KINDS),
    ("step action", _ACTIONS),
    ("result kind", _RESULT_KINDS),
    ("host executor", _EXECUTORS),
    ("report section", _SECTIONS),
    ("conclusion rule", _RULES),
    ("command", _COMMANDS),
)

T = TypeVar("T")


@functools.cache
def _metadata(dist: importlib.metadata.Distribution) -> tuple[str, str]:
    """A package's name and version, read once: each ``Distribution.name`` or
    ``.version`` parses its METADATA file again (93 parses, 25 ms of CPU, in
    every process that loaded the tables)."""
    meta = dist.metadata
    return meta["Name"], meta["Version"]


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    return _metadata(ep.dist)[0] if ep.dist is not None else ""


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """pgrig's own entry points first, then every other package's, each by
    package and name: the same order on every run."""
    found = importlib.metadata.entry_points(group=GROUP)
    own = sorted((ep for ep in found if _dist(ep) == OWN), key=lambda e: e.name)
    others = sorted((ep for ep in found if _dist(ep) != OWN), key=lambda e: (_dist(e), e.name))
    return [*own, *others]


def disable(names: str, why: str) -> None:
    """Leave these plug-ins (entry point names, comma-separated) out of this run;
    asked before the tables load (``pgrig -p no:NAME``)."""
    if _loading:
        raise UsageError(
            f"cannot disable plug-ins {names}: they are loaded already",
            hint="disable them before anything asks the registry (pgrig -p no:NAME ...)",
        )
    for name in (n.strip() for n in names.split(",")):
        if name:
            _DISABLED[name] = why


def load() -> None:
    """Fill the tables from the entry points, once (on first use)."""
    if _refused:
        raise _refused[0]
    if _loading:
        return
    _loading.append(True)
    disable_env = os.environ.get(DISABLE_ENV, "")
    for name in (n.strip() for n in disable_env.split(",")):
        if name:
            _DISABLED.setdefault(name, f"{DISABLE_ENV}={disable_env}")
    found = _entry_points()
    if not any(_dist(ep) == OWN for ep in found):
        _loading.clear()  # asked again after the fix, it loads
        raise PgrigError(
            f"pgrig's own plug-ins are not registered: no {GROUP} entry points of pgrig "
            "are installed (an installation made before they existed?)",
            hint="reinstall pgrig: pip install -e . (or make venv)",
        )
    unknown = sorted(set(_DISABLED) - {ep.name for ep in found})
    if unknown:
        raise UsageError(
            f"no plug-in named {', '.join(unknown)} is installed, so none can be disabled "
            f"({_DISABLED[unknown[0]]})",
            hint="pgrig plugins lists the installed ones: "
            + ", ".join(sorted({ep.name for ep in found})),
        )
    # Every plug-in imported and checked before any registers (pluggy checks a
    # plug-in when it registers; a bad one refused here leaves nothing registered),
    # then all registered: each check and each addition made once, in one pass.
    loaded: list[tuple[importlib.metadata.EntryPoint, str, object]] = []
    for ep in found:
        dist = " ".join(_metadata(ep.dist)) if ep.dist is not None else "?"
        if ep.name in _DISABLED:
            _PLUGINS[ep.name] = Plugin(ep.name, ep.value, dist, disabled=_DISABLED[ep.name])
            continue
        try:
            plugin = ep.load()
        except (ImportError, AttributeError) as exc:
            unloadable = PgrigError(
                f"the plug-in {ep.name} ({ep.value}) cannot be loaded: {exc}",
                hint="reinstall the package that declares it, or uninstall it, or leave "
                f"it out of this run: {DISABLE_ENV}={ep.name}",
            )
            _refused.append(unloadable)
            raise unloadable from exc
        plugin = _declared(plugin)
        try:
            checks.refuse_first(checks.plugin(plugin))
        except PgrigError as exc:
            refused = _refusal(exc, ep.name, ep.value)
            _refused.append(refused)
            raise refused from exc
        loaded.append((ep, dist, plugin))
    for ep, dist, plugin in loaded:
        try:
            parts = add_plugin(plugin, ep.value, ep.name, checked=True)
        except PgrigError as exc:  # a clash with a plug-in registered before it
            _refused.append(exc)
            raise
        _PLUGINS[ep.name] = Plugin(ep.name, ep.value, dist, parts)


def _declared(plugin: object) -> object:
    """What an entry point names: an entry point installed before its module
    named its ``PARTS`` names the module."""
    if inspect.ismodule(plugin) and isinstance(getattr(plugin, "PARTS", None), Parts):
        return plugin.PARTS
    return plugin


def _refusal(exc: PgrigError, name: str, where: str) -> PgrigError:
    return type(exc)(
        f"the plug-in {name} ({where}) is refused, nothing of it is registered: {exc.message}",
        hint=(exc.hint + "; " if exc.hint else "")
        + f"or leave it out of this run: {DISABLE_ENV}={name}",
    )


def plugins() -> list[Plugin]:
    """Every installed plug-in, loaded or left out, in load order."""
    load()
    return list(_PLUGINS.values())


@contextlib.contextmanager
def _whole() -> Iterator[None]:
    """All or nothing: a registration that fails leaves the tables as they were."""
    saved = [dict(table) for _, table in _TABLES]
    owners = dict(_OWNERS)
    try:
        yield
    except BaseException:
        for (_, table), before in zip(_TABLES, saved, strict=True):
            table.clear()
            table.update(before)
        _OWNERS.clear()
        _OWNERS.update(owners)
        raise


def add_plugin(
    plugin: object, where: str, name: str | None = None, *, checked: bool = False
) -> tuple[tuple[str, str], ...]:
    """Register what an entry point (``name``, naming ``where``) names: a
    workload, a target kind, a command, ``Parts``, or a module or function
    whose ``register()`` adds its parts; checked (``checked``: by ``load``
    already) and registered whole, or refused with nothing registered.
    Returns what it registered, as (what, name)."""
    name = name or where
    plugin = _declared(plugin)
    parts: list[tuple[str, str]] = []
    _current.append((name, parts))
    try:
        with _whole():
            try:
                if not checked:
                    checks.refuse_first(checks.plugin(plugin))
                _add_plugin(plugin, where)
            except PgrigError as exc:
                raise _refusal(exc, name, where) from exc
    finally:
        _current.pop()
    return tuple(parts)


def _add_plugin(plugin: object, where: str) -> None:
    """Add a checked plug-in's parts (a ``register()`` hook's are checked as
    they register)."""
    if isinstance(plugin, Workload):
        _add_part(_WORKLOADS, plugin.type, plugin, "workload")
    elif isinstance(plugin, TargetKind):
        _add_part(_TARGET_KINDS, plugin.name, plugin, "target kind")
    elif isinstance(plugin, click.Command):  # callable too: not a register() hook
        _add(_COMMANDS, plugin.name or "", plugin, "command")
    elif isinstance(plugin, Parts):
        for kind_ in plugin.kinds:
            _add(_RESULT_KINDS, kind_.name, kind_, "result kind")
        for name, action in plugin.actions:
            _add_action(name, action)
        for name, executor in plugin.executors:
            _add(_EXECUTORS, name, executor, "host executor")
        for name, section in plugin.sections:
            _add(_SECTIONS, name, section, "report section")
        for name, rule in plugin.rules:
            _add(_RULES, name, rule, "conclusion rule")
    else:
        hook = getattr(plugin, "register", None) if inspect.ismodule(plugin) else plugin
        if not callable(hook):
            raise PgrigError(
                f"the plug-in {where} is not a workload, a target kind, a command, Parts "
                "or something with a register() function",
                hint="see docs/workloads.md, 'A plug-in of your own'",
            )
        hook()


def _owner() -> str:
    return _current[-1][0] if _current else DIRECT


def _add(table: MutableMapping[str, T], name: str, item: T, what: str) -> None:
    """Add one part; the same object again is no clash (a workload reusing
    another's action)."""
    if table.get(name, item) is not item:
        owner = _OWNERS.get((what, name), DIRECT)
        raise PgrigError(
            f"a {what} named {name!r} is registered already, by the plug-in {owner}",
            hint="name it in a namespace of its own",
        )
    if name not in table:
        _OWNERS[(what, name)] = _owner()
    table[name] = item
    if _current:
        _current[-1][1].append((what, name))


def _remove(table: MutableMapping[str, T], name: str, item: T) -> None:
    if table.get(name) is item:
        del table[name]


# --------------------------------------------------------------------------
# Adding and removing parts (the entry points' register(), tests' toys)


def register(workload: Workload) -> None:
    """Add a workload, with the step actions it brings: checked first, then
    added whole (a clash leaves nothing of it)."""
    checks.refuse_first(checks.plugin(workload))
    _add_part(_WORKLOADS, workload.type, workload, "workload")


def _add_part(
    table: MutableMapping[str, T], name: str, part: Workload | AnyKind, what: str
) -> None:
    """A workload or a target kind with its result kinds and step actions, whole."""
    with _whole():
        _add(table, name, cast(T, part), what)
        _own_kinds(part.kinds)
        for action_name, action in part.actions.items():
            _add_action(action_name, action)  # checked with the part (``checks.workload``)


def _own_kinds(brought: tuple[ResultKind, ...]) -> None:
    """A workload's or a target kind's result kinds: a name means one kind (the
    same object may come twice: pgbench's runs, of tpcb and custom)."""
    known = dict(_RESULT_KINDS)
    parts: list[Workload | AnyKind] = [*_WORKLOADS.values(), *_TARGET_KINDS.values()]
    for part in parts:
        known.update({k.name: k for k in part.kinds if k not in brought})
    for k in brought:
        if known.get(k.name, k) is not k:
            owner = _OWNERS.get(("result kind", k.name), "another")
            raise PgrigError(
                f"a result kind named {k.name!r} is registered already, by the plug-in {owner}",
                hint="name it in a namespace of its own",
            )
        _OWNERS.setdefault(("result kind", k.name), _owner())
        if _current:
            _current[-1][1].append(("result kind", k.name))


def unregister(workload: Workload) -> None:
    _remove(_WORKLOADS, workload.type, workload)
    for name, action in workload.actions.items():
        unregister_action(name, action)


def register_target_kind(kind: AnyKind) -> None:
    """Add a target kind; chosen by ``kind = "NAME"`` in a ``[[target]]`` (or by
    its ``claims``/``claim_key``), with the step actions it brings."""
    checks.refuse_first(checks.plugin(kind))
    _add_part(_TARGET_KINDS, kind.name, kind, "target kind")


def unregister_target_kind(kind: AnyKind) -> None:
    _remove(_TARGET_KINDS, kind.name, kind)
    for name, action in kind.actions.items():
        unregister_action(name, action)


def register_action(name: str, action: ActionMaker) -> None:
    """Add a step action: ``Call(name, {...})`` in a step runs ``action(**args)``.
    Its name is ``NAMESPACE.verb``; the namespace is the plug-in's that used it
    first (another plug-in may register the very same function there, no other)."""
    checks.refuse(f"step action {name!r}", checks.action(name, action))
    _add_action(name, action)


def _add_action(name: str, action: ActionMaker) -> None:
    """A checked step action, in its plug-in's namespace."""
    space = name.split(".", 1)[0]
    owner = _OWNERS.get(("namespace", space))
    if owner is not None and owner != _owner() and _ACTIONS.get(name) is not action:
        raise PgrigError(
            f"the step action {name!r} is in the namespace {space!r}, which is the plug-in "
            f"{owner}'s",
            hint=f"name it {_owner().replace('-', '_')}.{name.split('.', 1)[1]}",
        )
    _add(_ACTIONS, name, action, "step action")
    _OWNERS.setdefault(("namespace", space), _owner())


def unregister_action(name: str, action: ActionMaker) -> None:
    _remove(_ACTIONS, name, action)


def register_kind(kind: ResultKind) -> None:
    """Add a result kind that no workload or target kind brings (the probes', the
    monitor's, the storage lab's)."""
    checks.refuse(f"result kind {getattr(kind, 'name', '?')!r}", checks.result_kinds((kind,)))
    _add(_RESULT_KINDS, kind.name, kind, "result kind")


def unregister_kind(kind: ResultKind) -> None:
    _remove(_RESULT_KINDS, kind.name, kind)


def register_executor(name: str, executor: type[Executor]) -> None:
    """Add a kind of host executor (``local``, ``ssh``)."""
    checks.refuse(f"host executor {name!r}", checks.executor(executor, Executor))
    _add(_EXECUTORS, name, executor, "host executor")


def unregister_executor(name: str, executor: type[Executor]) -> None:
    _remove(_EXECUTORS, name, executor)


def register_section(name: str, section: ReportSection) -> None:
    """Add a report section of its own (after the workloads' sections)."""
    checks.refuse(f"report section {name!r}", checks.function(section, "it"))
    _add(_SECTIONS, name, section, "report section")


def unregister_section(name: str, section: ReportSection) -> None:
    _remove(_SECTIONS, name, section)


def register_rule(name: str, rule: Rule) -> None:
    """Add a conclusion rule (after the report's own rules and the workloads')."""
    checks.refuse(f"conclusion rule {name!r}", checks.function(rule, "it"))
    _add(_RULES, name, rule, "conclusion rule")


def unregister_rule(name: str, rule: Rule) -> None:
    _remove(_RULES, name, rule)


def register_command(command: click.Command) -> None:
    """Add a command of the command line (``pgrig NAME``)."""
    checks.refuse_first(checks.plugin(command))
    _add(_COMMANDS, command.name or "", command, "command")


def unregister_command(command: click.Command) -> None:
    _remove(_COMMANDS, command.name or "", command)


# --------------------------------------------------------------------------
# Reading the tables (each loads the entry points first)


def workloads() -> dict[str, Workload]:
    load()
    return dict(sorted(_WORKLOADS.items(), key=lambda item: item[1].order))


def target_kinds() -> dict[str, AnyKind]:
    load()
    return dict(sorted(_TARGET_KINDS.items(), key=lambda item: item[1].order))


def actions() -> dict[str, ActionMaker]:
    load()
    return _ACTIONS


def executors() -> dict[str, type[Executor]]:
    load()
    return _EXECUTORS


def commands() -> dict[str, click.Command]:
    load()
    return _COMMANDS


def sections() -> Iterator[ReportSection]:
    """Every plug-in's report section, in the report's order: the target kinds',
    the workloads', then those registered on their own."""
    load()
    for kind in target_kinds().values():
        yield kind.section
    for workload in workloads().values():
        yield workload.section
    yield from _SECTIONS.values()


def runs_reports() -> list[RunsReport]:
    """Every workload's runs report, in the workloads' order, each once (two
    workloads may share one: pgbench's TPC-B and custom scripts)."""
    found = [w.runs_report for w in workloads().values() if w.runs_report is not None]
    return list({id(r): r for r in found}.values())


def rules() -> Iterator[Rule]:
    """Every plug-in's conclusion rules: the workloads', then those registered
    on their own."""
    load()
    for workload in workloads().values():
        yield from workload.rules
    yield from _RULES.values()


def resolve(call: Call) -> Action:
    """What a step's ``action`` runs: its registered function applied to its
    arguments, a function of the step's Context and progress line."""
    # One table holds both kinds of maker; the step's field says which this is.
    return cast("Action", _made(call))


def resolve_prepare(call: Call) -> Prepare:
    """What a step's ``prepare`` runs (its result is nothing)."""
    return cast("Prepare", _made(call))


def _made(call: Call) -> Action | Prepare:
    made = actions().get(call.name)
    if made is None:  # a step made by a plugin that is not loaded, or a typo
        raise PgrigError(
            f"no step action named {call.name!r} is registered",
            hint="is the plug-in that makes it installed? (its pgrig.plugins entry point)",
        )
    return made(**call.args)


def target_kind(spec: TargetSpec, power_loss: str | None = None) -> AnyKind:
    """The kind the target names (``kind = ...``), or else the first that claims
    it (``power_loss``: the workload that cuts the power, if any)."""
    kinds_ = target_kinds()
    if spec.kind is not None:
        return kinds_[spec.kind]
    return next(k for k in kinds_.values() if k.claims(spec, power_loss))


def title(workload: str) -> str:
    """A workload's name as the report says it: its type's ``title`` where the
    spec kept its type's name ("TPC-B" for tpcb), else the name itself."""
    found = workloads().get(workload)
    return found.title if found is not None and found.title else workload


def of(spec: WorkloadSpec) -> Workload:
    """The workload a parsed spec belongs to."""
    return workloads()[spec.kind]


def kinds() -> dict[str, ResultKind]:
    """Every result kind: those registered on their own, the workloads', the
    target kinds'."""
    load()
    out = dict(_RESULT_KINDS)
    for workload in workloads().values():
        out.update({k.name: k for k in workload.kinds})
    for kind_ in target_kinds().values():
        out.update({k.name: k for k in kind_.kinds})
    return out


def kind(name: str) -> ResultKind | None:
    return kinds().get(name)


def typed_result(record: RunRecord) -> Any:
    """The record's result as its registered dataclass; None when the run did not
    succeed or its kind is unknown to this version of pgrig. A record ``decoded``
    already gives what it holds."""
    if isinstance(record, Decoded) and record.holds():
        return record.value
    found = kind(record.kind)
    if found is None or record.status != "ok" or record.result is None:
        return None
    return typed(record, found.type)


def decoded(records: Iterable[RunRecord]) -> list[RunRecord]:
    """The records, each with its result decoded once into its kind's dataclass
    (``Decoded``): a report decodes its study's records here, at its start, and
    every section reads them (a record decoded already stays as it is)."""
    out: list[RunRecord] = []
    for rec in records:
        if isinstance(rec, Decoded) and rec.source is rec.result:
            out.append(rec)
        else:
            out.append(Decoded.of(rec, typed_result(rec)))
    return out


def headline(kind_name: str, result: Any) -> str:
    found = kind(kind_name)
    return found.headline(result) if found is not None and result is not None else ""


def columns(kind_name: str, result: Any) -> dict[str, Any]:
    found = kind(kind_name)
    return found.columns(result) if found is not None and result is not None else {}


def result_type(kind_name: str) -> type:
    found = kind(kind_name)
    if found is None:
        raise KeyError(f"no result kind {kind_name!r} is registered")
    return found.type


def __getattr__(name: str) -> object:
    """``WORKLOADS``, ``TARGET_KINDS`` and ``ACTIONS`` as the tables they were
    (loaded on first use)."""
    tables: dict[str, Callable[[], object]] = {
        "WORKLOADS": workloads,
        "TARGET_KINDS": target_kinds,
        "ACTIONS": actions,
    }
    if name in tables:
        return tables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DISABLE_ENV",
    "GROUP",
    "AnyKind",
    "Parts",
    "Plugin",
    "actions",
    "add_plugin",
    "columns",
    "commands",
    "decoded",
    "disable",
    "executors",
    "headline",
    "kind",
    "kinds",
    "load",
    "of",
    "plugins",
    "register",
    "register_action",
    "register_command",
    "register_executor",
    "register_kind",
    "register_rule",
    "register_section",
    "register_target_kind",
    "resolve",
    "result_type",
    "rules",
    "runs_reports",
    "sections",
    "target_kind",
    "target_kinds",
    "title",
    "typed_result",
    "unregister",
    "workloads",
]
