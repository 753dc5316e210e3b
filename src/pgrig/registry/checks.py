"""What a plug-in's parts must be before they register (pluggy checks a hook
implementation against its spec when the plug-in registers, not when the hook
is first called): a workload's type, schema, result kinds, actions and rules; a
target kind's; a step action's name. Each check returns the problems found, in
words that say how to fix them; ``refuse`` raises them as one error.

A missing schema used to register silently and fail much later, as a
``pgrig plan`` traceback or a campaign key nobody could document."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import is_dataclass
from typing import Any

import click

from pgrig.errors import PgrigError
from pgrig.hosts.executor import Executor
from pgrig.registry.parts import Parts
from pgrig.registry.target import TargetKind
from pgrig.registry.workload import Workload
from pgrig.results import ResultKind
from pgrig.schema import NAME, Key, Schema

HINT = "see docs/workloads.md, 'A plug-in of your own'"


def refuse(what: str, problems: list[str]) -> None:
    """Raise the problems found in ``what`` (a workload 'x') as one error."""
    if problems:
        raise PgrigError(f"{what}: " + "; ".join(problems), hint=HINT)


def refuse_first(found: Iterable[tuple[str, list[str]]]) -> None:
    """Raise the problems of the first part that has any (``plugin``'s)."""
    for what, problems in found:
        refuse(what, problems)


def plugin(value: object) -> list[tuple[str, list[str]]]:
    """Every part of one plug-in, checked before any of it registers: (what,
    its problems) per part. A ``register()`` hook's parts are checked as they
    register (``pgrig.registry.register*``)."""
    if isinstance(value, Workload):
        return [(f"workload {getattr(value, 'type', '?')!r}", workload(value))]
    if isinstance(value, TargetKind):
        return [(f"target kind {getattr(value, 'name', '?')!r}", target_kind(value))]
    if isinstance(value, click.Command):
        return [("command", [] if value.name else ['it has no name (click.command("NAME"))'])]
    if isinstance(value, Parts):
        return [
            *(
                (f"result kind {getattr(k, 'name', '?')!r}", result_kinds((k,)))
                for k in value.kinds
            ),
            *((f"step action {name!r}", action(name, a)) for name, a in value.actions),
            *((f"host executor {name!r}", executor(e, Executor)) for name, e in value.executors),
            *((f"report section {name!r}", function(s, "it")) for name, s in value.sections),
            *((f"conclusion rule {name!r}", function(r, "it")) for name, r in value.rules),
        ]
    return []


def _name(value: object, attr: str) -> list[str]:
    if not isinstance(value, str) or not value:
        return [f'its {attr} is not set (a class attribute: {attr} = "NAME")']
    if not NAME.fullmatch(value):
        return [f"its {attr} {value!r} is not a name (letters, digits, '.', '_', '-')"]
    return []


def schema(value: object, *, required: bool) -> list[str]:
    """A campaign table's keys: a ``Schema`` of ``Key``s, each named once and
    documented (``pgrig keys`` and the docs print them)."""
    if value is None and required:
        return ["it has no schema (schema = Schema(TITLE, keys...): its campaign keys)"]
    if value is None:
        return []
    if not isinstance(value, Schema):
        return [f"its schema is a {type(value).__name__}, not a pgrig.schema.Schema"]
    out: list[str] = []
    if not isinstance(value.title, str) or not value.title:
        out.append("its schema has no title (the docs' heading for its keys)")
    seen: set[str] = set()
    for key in value.keys:
        if not isinstance(key, Key):
            out.append(f"its schema holds {key!r}, not a key (pgrig.schema.text, integer, ...)")
            continue
        if key.name in seen:
            out.append(f"its schema names the key {key.name!r} twice")
        seen.add(key.name)
        if not key.doc:
            out.append(f"its key {key.name!r} has no doc (what the key means)")
        if not callable(key.read):
            out.append(f"its key {key.name!r} has no read function")
    return out


def result_kinds(kinds: object) -> list[str]:
    if not isinstance(kinds, tuple):
        return [f"its kinds are a {type(kinds).__name__}, not a tuple of ResultKind"]
    out: list[str] = []
    seen: set[str] = set()
    for kind in kinds:
        if not isinstance(kind, ResultKind):
            out.append(f"its kinds hold {kind!r}, not a pgrig.results.ResultKind")
            continue
        out += _name(kind.name, "result kind's name")
        if not (inspect.isclass(kind.type) and is_dataclass(kind.type)):
            out.append(f"its result kind {kind.name!r} records {kind.type!r}, not a dataclass")
        if kind.name in seen:
            out.append(f"it names the result kind {kind.name!r} twice")
        seen.add(kind.name)
    return out


def action(name: object, maker: object) -> list[str]:
    """A step action: ``NAMESPACE.verb`` (its plug-in's namespace) and a
    function of the step's arguments."""
    if not isinstance(name, str) or "." not in name.strip(".") or " " in name:
        return [f"the step action name {name!r} is not NAMESPACE.verb (e.g. example.count)"]
    return function(maker, f"its step action {name!r}")


def function(value: object, what: str) -> list[str]:
    return [] if callable(value) else [f"{what} is a {type(value).__name__}, not a function"]


def executor(value: object, base: type) -> list[str]:
    """A kind of host executor: a class of ``base`` (``hosts.executor.Executor``)."""
    if inspect.isclass(value) and issubclass(value, base):
        return []
    return [f"it is not a subclass of {base.__name__}"]


def _actions(actions: object) -> list[str]:
    if not isinstance(actions, Mapping):
        return [f"its actions are a {type(actions).__name__}, not a mapping of name to function"]
    return [p for name, maker in actions.items() for p in action(name, maker)]


def _functions(values: Iterable[Any], what: str) -> list[str]:
    return [p for v in values for p in function(v, what)]


def workload(w: object) -> list[str]:
    """A workload: its type, schema (required: its ``[[workload]]`` keys), kinds,
    actions, rules and order."""
    out = _name(getattr(w, "type", None), "type")
    out += schema(getattr(w, "schema", None), required=True)
    out += result_kinds(getattr(w, "kinds", ()))
    out += _actions(getattr(w, "actions", {}))
    rules = getattr(w, "rules", ())
    if not isinstance(rules, tuple):
        out.append(f"its rules are a {type(rules).__name__}, not a tuple of functions")
    else:
        out += _functions(rules, "a conclusion rule of it")
    out += _order(w)
    return out


def target_kind(k: object) -> list[str]:
    """A target kind: its name, summary (docs/targets.md, the report), schema
    (optional: its own ``[[target]]`` keys), kinds, actions and order."""
    out = _name(getattr(k, "name", None), "name")
    summary = getattr(k, "summary", None)
    if not isinstance(summary, str) or not summary:
        out.append('it has no summary (summary = "one line for the docs and the report")')
    out += schema(getattr(k, "schema", None), required=False)
    claim = getattr(k, "claim_key", None)
    held = getattr(k, "schema", None)
    if claim is not None and isinstance(held, Schema) and claim not in held.names:
        out.append(f"its claim_key {claim!r} is not a key of its schema")
    out += result_kinds(getattr(k, "kinds", ()))
    out += _actions(getattr(k, "actions", {}))
    out += _order(k)
    return out


def _order(part: object) -> list[str]:
    order = getattr(part, "order", 100)
    return [] if isinstance(order, int) else [f"its order {order!r} is not a whole number"]


__all__ = [
    "action",
    "executor",
    "function",
    "refuse",
    "result_kinds",
    "schema",
    "target_kind",
    "workload",
]
