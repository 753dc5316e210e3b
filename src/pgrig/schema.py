"""Campaign keys declared once: name, type, default, check and doc.

A ``Schema`` reads one TOML table in one pass into the values of a spec
dataclass's fields, refuses keys nobody declared (naming the nearest valid one)
and renders the Markdown table docs/campaigns.md shows - a test keeps the two in
step. ``Table`` gives typed access with errors that name the file, the line and
the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FunctionType
from typing import Any, NoReturn, TypeVar, overload

from pgrig.errors import UsageError

# --------------------------------------------------------------------------
# Locating keys in the file, for error messages

_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")

# Names that become ids and parts of paths (campaigns, targets, studies).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# Their longest: a work directory is named pgrig-CAMPAIGN-YYYYMMDD-HHMMSS-TARGET,
# under the 255 bytes of a file name with room to spare (a 250-character name
# read "File name too long / hint: free some space"; 300 a traceback).
NAME_MAX = 64


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a campaign's or a target's name, or None; said with
    the name (``shown_name``) by its key."""
    if len(name) > NAME_MAX:
        return f"{len(name)} characters: at most {NAME_MAX} (it names files and directories)"
    if not (name[:1].isascii() and name[:1].isalnum()):
        return "it must start with a letter or a digit (it names files, and `-rf` is an option)"
    if not NAME.fullmatch(name):
        return "use letters, digits, '.', '_' and '-' only"
    return None


def shown_name(name: str) -> str:
    """A name in a message: a 300-character one cut, not the whole line."""
    return repr(name if len(name) <= 40 else name[:37] + "...")


# A value of parsed TOML (tomllib's output before any check): what a table holds.
TomlValue = str | int | float | bool | list["TomlValue"] | dict[str, "TomlValue"]
# Where a table sits: ("target", 1) for the second [[target]], ("campaign",).
TablePath = tuple[str | int, ...]
# A campaign document: parsed TOML, or the quick study's options made into one.
Document = dict[str, TomlValue]

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Locator:
    """Maps (table path, key) to a line number of the TOML text.

    Table paths look like ``("target", 1)`` for the second ``[[target]]`` or
    ``("campaign",)``; keys of inline tables are found on their parent's line.
    The text is scanned when an error first asks for a line: a good file never.
    """

    text: str

    @functools.cached_property
    def _places(self) -> tuple[dict[tuple[TablePath, str], int], dict[TablePath, int]]:
        lines: dict[tuple[TablePath, str], int] = {}
        tables: dict[TablePath, int] = {}
        counts: dict[str, int] = {}
        path: TablePath = ()
        for number, line in enumerate(self.text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                name = header.group(2).strip()
                if header.group(1):  # [[array]]
                    index = counts.get(name, -1) + 1
                    counts[name] = index
                    path = (*name.split("."), index)
                else:
                    parts = name.split(".")
                    # [target.set] after [[target]]: belongs to the last target
                    if parts[0] in counts:
                        path = (parts[0], counts[parts[0]], *parts[1:])
                    else:
                        path = tuple(parts)
                tables.setdefault(path, number)
                continue
            key = _KEY.match(line)
            if key:
                lines.setdefault((path, key.group(1).strip("\"'")), number)
        return lines, tables

    def line(self, path: TablePath, key: str | None = None) -> int | None:
        lines, tables = self._places
        if key is not None and (path, key) in lines:
            return lines[(path, key)]
        # an inline table: the key of its parent
        if key is not None and len(path) >= 1 and isinstance(path[-1], str):
            parent = lines.get((path[:-1], path[-1]))
            if parent:
                return parent
        return tables.get(path)


class Table:
    """Typed access to one table of the campaign with precise errors."""

    def __init__(self, data: dict[str, TomlValue], path: TablePath, ctx: Context) -> None:
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def where(self, key: str | None = None) -> str:
        line = self.ctx.locator.line(self.path, key)
        table = table_name(self.path)
        place = f"{self.ctx.source}:{line}" if line else self.ctx.source
        return f"{place}: {table}.{key}" if key else f"{place}: [{table}]"

    def inherited(self, key: str) -> Table:
        """The table a key of this one came from: the campaign's when this one
        leaves it out (a campaign-level `inventory` was reported as target[0]'s)."""
        return self if key in self.data else Table({}, ("campaign",), self.ctx)

    def error(self, key: str | None, message: str, hint: str | None = None) -> UsageError:
        option = self.ctx.options.get((*self.path, key)) if key is not None else None
        if option is not None:  # the quick study: name the option the user typed
            return UsageError(f"{option} {message}", hint=hint)
        return UsageError(f"{self.where(key)}: {message}", hint=hint)

    @overload
    def get(self, key: str, kind: type[T], default: None = None) -> T | None: ...
    @overload
    def get(self, key: str, kind: type[T], default: T) -> T: ...
    @overload
    def get(
        self, key: str, kind: tuple[type[T], type[U]], default: None = None
    ) -> T | U | None: ...
    @overload
    def get(self, key: str, kind: tuple[type[T], type[U]], default: T | U) -> T | U: ...
    @overload
    def get(self, key: str, kind: Kind, default: object = None) -> Any: ...

    def get(self, key: str, kind: type | tuple[type, ...], default: object = None) -> object:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(type_name(k) for k in kinds)
            # [target] written for [[target]]: a table where a list of them is wanted
            listed = list in kinds and isinstance(value, dict) and not self.path
            raise self.error(
                key,
                f"expected {names}, got {type_name(type(value))} {value!r}",
                hint=f"write [[{key}]] (two brackets: one of a list) for [{key}]"
                if listed
                else None,
            )
        if isinstance(value, float) and not math.isfinite(value):
            # TOML has nan and inf; no duration, rate or percentage of pgrig's is either
            # (a durability run at nan seconds acknowledged nothing and passed)
            raise self.error(
                key, f"{value}: not a number pgrig can use", hint="give a finite number"
            )
        return value

    def ints(self, key: str, default: tuple[int, ...], minimum: int = 1) -> tuple[int, ...]:
        value = self.get(key, (int, list), None)
        if value is None:
            return default
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.error(key, "must not be empty")
        for item in items:
            if not isinstance(item, int) or isinstance(item, bool):
                raise self.error(key, f"expected integers, got {item!r}")
            if item < minimum:
                raise self.error(key, f"{item} is less than {minimum}")
        twice = sorted({item for item in items if items.count(item) > 1})
        if twice:  # scales = [1, 1] planned each point twice and ran it once (issue 33)
            raise self.error(
                key,
                f"{', '.join(map(str, twice))} {'is' if len(twice) == 1 else 'are'} given twice",
                hint="list each value once; repeat = N runs every point N times",
            )
        return tuple(items)

    def choice(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in allowed:
            raise self.error(key, f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    def table(self, key: str) -> Table | None:
        value = self.get(key, dict, None)
        return None if value is None else Table(value, (*self.path, key), self.ctx)

    def path_value(self, key: str) -> Path | None:
        value = self.get(key, str, None)
        if value is None:
            return None
        if not value.strip():  # directory = "" ran on the campaign file's directory
            raise self.error(key, "is empty: give a path")
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.ctx.base / p)

    def finish(self, allowed: tuple[str, ...] | None = None) -> None:
        """Refuse keys nobody read, naming the nearest valid one."""
        valid = allowed if allowed is not None else tuple(sorted(self.used))
        for key in self.data:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
                raise self.error(
                    key,
                    f"unknown key {key!r}",
                    hint=f"did you mean {close[0]!r}?"
                    if close
                    else f"valid keys here: {', '.join(valid)}",
                )


@dataclass
class Context:
    source: str
    base: Path
    locator: Locator
    # The campaign's target names, known before its workloads are read (a
    # workload key that names a target is checked against them).
    targets: tuple[str, ...] = ()
    inventory: Path | None = None  # [campaign] inventory: where remote targets' hosts are
    # A campaign made of command-line options (the quick study): the option
    # each key came from, by table path and key, so that errors name it.
    options: dict[TablePath, str] = field(default_factory=dict)


def type_name(t: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true/false",
        list: "a list",
        dict: "a table",
    }.get(t, t.__name__)


def table_name(path: TablePath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


# --------------------------------------------------------------------------
# Keys


# A key's reader: (table, key, value) -> the field's value. ``value`` is the
# key's value as given (an owner's key: checked against the TOML type it
# declares), or its default when the table leaves the key out.
Read = Callable[[Table, str, Any], Any]
# The TOML type an owner's key declares: what the schema checks before its owner
# makes the value (``Path``: a path relative to the campaign file; ``Table``: a
# table, handed over as one, so its owner reads its keys with errors that name them).
Kind = type | tuple[type, ...]


@dataclass(frozen=True)
class Key:
    """One key of a campaign table."""

    name: str
    default: Any
    doc: str
    read: Read
    field: str | None = None  # the spec's field, when its name differs from the key's
    shown_default: str | None = None  # for the docs, when the default is computed
    attr: str = dataclasses.field(init=False, repr=False)  # the spec's field

    def __post_init__(self) -> None:
        object.__setattr__(self, "attr", self.field or self.name)

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        value = self.default
        if value is None:
            return "-"
        if isinstance(value, bool):
            return f"`{'true' if value else 'false'}`"
        if isinstance(value, str):
            return f'`"{value}"`'
        if isinstance(value, tuple):
            items = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value)
            return f"`[{items}]`"
        return f"`{value}`"


def text(name: str, default: str | None, doc: str, **kw: str | None) -> Key:
    return Key(name, default, doc, lambda t, k, d: t.get(k, str, d), **kw)


def path(name: str, doc: str, **kw: str | None) -> Key:
    """A path, relative to the campaign file (``Table.path_value``); no default."""
    return Key(name, None, doc, lambda t, k, d: t.path_value(k), **kw)


def flag(name: str, default: bool, doc: str, **kw: str | None) -> Key:
    return Key(name, default, doc, lambda t, k, d: t.get(k, bool, d), **kw)


def number(name: str, default: float | None, doc: str, *, above: float | None = None,
           **kw: str | None) -> Key:  # fmt: skip
    def read(t: Table, k: str, d: float | None) -> float | None:
        value = t.get(k, float, d)
        if value is not None and above is not None and value <= above:
            raise t.error(k, f"{value:g}: must be more than {above:g}")
        return value

    return Key(name, default, doc, read, **kw)


def integer(name: str, default: int | None, doc: str, *, minimum: int = 1, **kw: str | None) -> Key:
    def read(t: Table, k: str, d: int) -> int:
        return t.ints(k, (d,), minimum=minimum)[0] if k in t.data else d

    return Key(name, default, doc, read, **kw)


def port(name: str, default: int, doc: str, **kw: str | None) -> Key:
    """A TCP port: 70000 reached the socket as an OverflowError."""

    def read(t: Table, k: str, d: int) -> int:
        value = t.ints(k, (d,), minimum=1)[0] if k in t.data else d
        if value > 65535:
            raise t.error(k, f"{value}: a TCP port is at most 65535", hint=f"{k} = {d}")
        return value

    return Key(name, default, doc, read, **kw)


def integers(name: str, default: tuple[int, ...] | None, doc: str, *, minimum: int = 1,
             **kw: str | None) -> Key:  # fmt: skip
    def read(t: Table, k: str, d: tuple[int, ...]) -> tuple[int, ...]:
        return t.ints(k, d, minimum=minimum) if k in t.data else d

    return Key(name, default, doc, read, **kw)


def choice(name: str, allowed: tuple[str, ...], default: str, doc: str, **kw: str | None) -> Key:
    return Key(name, default, doc, lambda t, k, d: t.choice(k, allowed, d), **kw)


def choices(name: str, allowed: tuple[str, ...], default: tuple[str, ...], doc: str,
            **kw: str | None) -> Key:  # fmt: skip
    def read(t: Table, k: str, d: tuple[str, ...]) -> tuple[str, ...]:
        values = tuple(t.get(k, list, list(d)))
        for v in values:
            if v not in allowed:
                raise t.error(k, f"{v!r} is not one of {', '.join(allowed)}")
        if not values:
            raise t.error(k, "must not be empty")
        return values

    return Key(name, default, doc, read, **kw)


@dataclass(frozen=True)
class OwnKey(Key):
    """A key its owner makes the value of with a reader of its own: the schema
    checks the TOML type it declares (``kind``) and hands the value over
    (``Checked.owned``); the owner calls its reader, never the schema."""

    kind: Kind | None = None  # None: any TOML value (the reader checks it)

    def given(self, t: Table) -> Any:
        """The key's value as given, of its kind; its default when absent."""
        if self.name not in t.data:
            return self.default
        if self.kind is None:
            return t.data[self.name]
        if self.kind is Path:
            return t.path_value(self.name)
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        if Table not in kinds:
            return t.get(self.name, self.kind)
        value = t.get(self.name, tuple(dict if k is Table else k for k in kinds))
        return Table(value, (*t.path, self.name), t.ctx) if isinstance(value, dict) else value


def custom(name: str, default: Any, doc: str, read: Read, *, kind: Kind | None = None,
           **kw: str | None) -> Key:  # fmt: skip
    """A key its owner reads with a reader of its own (a fio size, a repeat
    policy), given the value of the TOML type ``kind`` the schema checked: the
    schema hands it over and calls no reader of a part above it."""
    return OwnKey(name, default, doc, read, kind=kind, **kw)


@dataclass(frozen=True)
class NameKey(OwnKey):
    """A name that becomes an id and part of paths (a campaign's, a target's):
    the schema checks a given one (``name_problem``) in its pass; its owner
    refuses a missing or empty one, saying what its table lacks."""

    example: str | None = None  # a good value, the hint of a bad one

    def given(self, t: Table) -> Any:
        value = super().given(t)
        if value and (problem := name_problem(value)) is not None:
            hint = f"{self.name} = {self.example}" if self.example else None
            raise t.error(self.name, f"{shown_name(value)}: {problem}", hint=hint)
        return value


def naming(name: str, doc: str, read: Read, *, example: str | None = None,
           **kw: str | None) -> Key:  # fmt: skip
    """A key whose value names a campaign or a target (``NameKey``); ``read``,
    its owner's, refuses a missing one."""
    return NameKey(name, None, doc, read, kind=str, example=example, **kw)


def _raise(t: Table, key: str, refused: UsageError) -> NoReturn:
    raise refused


# A key the schema refused, as ``Checked.owned`` ends with it: its reader raises
# the refusal, in the keys' order among the owner's keys.
REFUSED = OwnKey("(refused)", None, "a key the schema refused", _raise)


@dataclass(frozen=True)
class Checked:
    """A table as its schema read it in one pass (``Schema.checked``), in the
    keys' order: each key of the kinds declared here read whole, each owner's key
    (``custom``) as given, for its owner to make its value of. ``owned`` is what
    is left to the owner, in the keys' order: its keys up to the first the schema
    refused (a key nobody declared: after all of them), then that refusal, as a
    key whose reader raises it (``REFUSED``). Its owner reads them all::

        values = read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}

    so that a table with two bad keys is refused for the first, as if read key
    by key, and the owner of a good table does not call the schema back."""

    values: dict[str, Any]  # by field name: the schema's values, the owner's keys as given
    owned: tuple[tuple[OwnKey, Any], ...]  # the owner's keys, and the first refusal last
    refused: UsageError | None = None
    # The key being read when the pass refused (None: a key nobody declared,
    # refused after all of them): which part of a joined schema the refusal is.
    refused_key: str | None = None

    def split(self, first: Schema | None, rest: Schema) -> tuple[Checked, Checked]:
        """A joined schema's pass (``rest.after(first)``) in its two parts:
        ``first``'s keys (a target kind's: the refusal if the pass stopped at a
        key only it declares) and ``rest``'s (the common keys: any refusal, as
        they end with it). A key both declare is read once, as ``rest`` declares
        it, and its value is in both parts. None: a first part with no keys."""
        keys = first.keys if first is not None else ()
        names = {k.name for k in keys} - set(rest.names)
        mine = self.refused if self.refused_key in names else None
        ours, theirs = {k.attr for k in keys}, {k.attr for k in rest.keys}
        return Checked(
            {k: v for k, v in self.values.items() if k in ours},
            tuple((k, v) for k, v in self.owned if k.name in names or (k is REFUSED and mine)),
            mine,
            self.refused_key if mine else None,
        ), Checked(
            {k: v for k, v in self.values.items() if k in theirs},
            tuple((k, v) for k, v in self.owned if k.name not in names),
            self.refused,
            self.refused_key,
        )


def given_checked(parse: Any) -> Any:
    """A plug-in's ``parse(self, table)`` as written before the campaign read its
    keys for it (it reads them itself: ``SCHEMA.read(table)``), made one that
    takes the campaign's pass, ``parse(self, table, read)``, and leaves it: the
    plug-ins registered then still work. Any other ``parse`` as it is."""
    if not isinstance(parse, FunctionType) or len(inspect.signature(parse).parameters) != 2:
        return parse

    @functools.wraps(parse)
    def parse_checked(self: object, table: Table, read: Checked) -> Any:
        return parse(self, table)

    return parse_checked


class Schema:
    """The keys of one campaign table, in the order the docs list them: data
    read in one pass (``checked``). A table of the kinds of key declared here
    (``text``, ``flag``, ``integers``, ...) is ``read`` whole; a table with keys of
    its owner's (``custom``) is read by the schema and finished by its owner::

        read = SCHEMA.checked(t)
        values = read.values | {k.attr: k.read(t, k.name, v) for k, v in read.owned}

    so that the schema never calls back up into the parts that declare it
    (issue 43: it did, 24 of the run route's 66 climbs), nor do they call
    down into it key by key (issue 43: two stays a key on the run route)."""

    def __init__(self, title: str, *keys: Key, also: tuple[str, ...] = ()) -> None:
        self.title = title
        self.keys = keys
        self.also = also  # keys another part reads (a workload's "type")
        self.names = tuple(k.name for k in keys)
        self.own = tuple(k.name for k in keys if isinstance(k, OwnKey))

    def checked(self, table: Table) -> Checked:
        """Every declared key read, in order, and the undeclared ones refused
        after: the first refusal held, not raised (``Checked.owned``)."""
        values: dict[str, Any] = {}
        owned: list[tuple[OwnKey, Any]] = []
        at: str | None = None
        try:
            for k in self.keys:
                at = k.name
                if isinstance(k, OwnKey):
                    values[k.attr] = k.given(table)
                    owned.append((k, values[k.attr]))
                else:
                    values[k.attr] = k.read(table, k.name, k.default)
            at = None
            table.finish((*self.also, *self.names))
        except UsageError as refused:
            return Checked(values, (*owned, (REFUSED, refused)), refused, at)
        return Checked(values, tuple(owned))

    def after(self, first: Schema) -> Schema:
        """This schema's keys after ``first``'s: a table that holds both (a
        target's kind's keys and the common ones) read in one pass, each part
        taken by its owner (``Checked.split``); a key of both read once, as
        this schema declares it."""
        own = tuple(k for k in first.keys if k.name not in self.names)
        return Schema(self.title, *own, *self.keys, also=self.also)

    def read(self, table: Table) -> dict[str, Any]:
        """Every declared key's value (or default) by field name; unknown keys
        refused. For a table of the kinds declared here: one with keys of its
        owner's is finished by its owner (``checked``)."""
        if self.own:
            raise TypeError(
                f"{self.title}: the keys {', '.join(self.own)} have readers of their owner's: "
                "its owner makes their values (Schema.checked, Checked.owned)"
            )
        read = self.checked(table)
        if read.refused is not None:
            raise read.refused
        return read.values

    def markdown(self) -> str:
        lines = ["| key | default | meaning |", "|---|---|---|"]
        lines += [f"| `{k.name}` | {k.default_text()} | {k.doc} |" for k in self.keys]
        return "\n".join(lines)
