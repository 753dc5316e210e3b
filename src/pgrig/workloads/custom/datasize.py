"""The size of the data a custom workload's setup SQL makes, read from its text.

``pgrig plan`` needs a size before anything ran: disk to refuse up front and a
load time. The setup is not run; its statements are read. Rows come from
``INSERT ... SELECT ... generate_series(a, b)`` (the way seed 001 and most
benchmark setups make bulk data), widths from the ``CREATE TABLE`` column types
and the literals inserted, with PostgreSQL's layout: a 24-byte tuple header (more
with a null bitmap past 8 columns), alignment, 4-byte line pointers, 8 kB pages;
B-tree indexes (primary keys, unique constraints, ``CREATE INDEX``) at 90% leaf
fill. Seed 001's million users: 270 MB estimated, 271 MB measured (258.2 MiB).
What the text does not say (rows from a file, a loop, a function) counts nothing:
the estimate is then a floor, and a measured setup replaces it
(``pgrig.calibration``: the setup's seconds, recorded per estimated size).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PAGE = 8192
PAGE_USABLE = PAGE - 24  # the page header
LINE_POINTER = 4
BTREE_FILL = 0.9  # a B-tree built by CREATE INDEX fills its leaves to 90%
DEFAULT_TEXT = 32  # a text column whose inserted value the setup does not show
# Bytes on disk and alignment per type (pg_type's typlen/typalign; varlena:
# the value plus a 1-byte short header, counted where the value is known).
TYPES: dict[str, tuple[int, int]] = {
    "smallint": (2, 2), "int2": (2, 2),
    "int": (4, 4), "integer": (4, 4), "int4": (4, 4), "serial": (4, 4),
    "bigint": (8, 8), "int8": (8, 8), "bigserial": (8, 8),
    "real": (4, 4), "float4": (4, 4), "float8": (8, 8), "double": (8, 8), "float": (8, 8),
    "boolean": (1, 1), "bool": (1, 1), "date": (4, 4), "oid": (4, 4),
    "timestamp": (8, 8), "timestamptz": (8, 8), "time": (8, 8), "money": (8, 8),
    "interval": (16, 8), "uuid": (16, 1), "inet": (8, 1), "cidr": (8, 1),
    "numeric": (9, 1), "decimal": (9, 1), "jsonb": (64, 4), "json": (64, 1), "bytea": (32, 4),
}  # fmt: skip
TEXT_TYPES = {"text", "varchar", "character", "char", "bpchar", "name", "citext"}


@dataclass
class _Table:
    columns: dict[str, str]  # name -> type's first word, in order
    defaults: set[str] = field(default_factory=set)  # columns not NULL when not inserted
    rows: int = 0
    width: int = 0  # a row's bytes as inserted (0: from the types alone)
    indexes: list[int] = field(default_factory=list)  # key widths

    def row_bytes(self) -> int:
        header = 23 + (math.ceil(len(self.columns) / 8) if len(self.columns) > 8 else 1)
        return _align(header, 8) + (self.width or self._typed_width())

    def _typed_width(self) -> int:
        return sum(_width(t, None) for t in self.columns.values())

    def bytes(self) -> int:
        if self.rows <= 0:
            return 0
        per_page = max(1, PAGE_USABLE // (_align(self.row_bytes(), 8) + LINE_POINTER))
        heap = math.ceil(self.rows / per_page) * PAGE
        index = sum(
            math.ceil(self.rows / max(1, int(PAGE_USABLE * BTREE_FILL) // (_align(8 + k, 8) + 4)))
            * PAGE
            for k in self.indexes
        )
        return heap + index


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _width(type_: str, value: str | None) -> int:
    """A column's bytes: a known value's, else its type's."""
    if value is not None and value.upper() == "NULL":
        return 0
    if type_ in TEXT_TYPES:
        if value is not None and (text := _literal(value)) is not None:
            return len(text.encode()) + 1
        return DEFAULT_TEXT
    return TYPES.get(type_, (8, 8))[0]


def _literal(expr: str) -> str | None:
    """The value of a string literal ('it''s', E'it\\'s', 'x'::text), else None."""
    m = re.match(r"\s*([Ee]?)'", expr)
    if m is None:
        return None
    end = _string_end(expr, m.end() - 1)
    if re.fullmatch(r"\s*(::\s*\w+)?\s*", expr[end:]) is None:
        return None  # an expression, not a literal
    body = expr[m.end() : end - 1].replace("''", "'")
    return re.sub(r"\\(.)", r"\1", body) if m.group(1) else body


def _string_end(sql: str, i: int) -> int:
    """The index after the string literal opening at ``i`` ('' doubles a quote;
    in an E'' string a backslash escapes)."""
    escapes = i > 0 and sql[i - 1] in "Ee"
    j = i + 1
    while j < len(sql):
        if escapes and sql[j] == "\\" or sql[j] == "'" and sql[j + 1 : j + 2] == "'":
            j += 2
        elif sql[j] == "'":
            return j + 1
        else:
            j += 1
    return len(sql)


def statements(sql: str) -> Iterator[str]:
    """The statements of a script: comments dropped, split at semicolons outside
    quotes and dollar quotes (function bodies stay whole)."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            i = sql.find("\n", i)
            i = n if i < 0 else i
            continue
        if sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "'":
            j = _string_end(sql, i)
            out.append(sql[i:j])
            i = j
            continue
        if c == "$" and (m := re.match(r"\$\w*\$", sql[i:])):
            j = sql.find(m.group(0), i + len(m.group(0)))
            j = n if j < 0 else j + len(m.group(0))
            out.append(sql[i:j])
            i = j
            continue
        if c == ";":
            if "".join(out).strip():
                yield "".join(out).strip()
            out = []
        else:
            out.append(c)
        i += 1
    if "".join(out).strip():
        yield "".join(out).strip()


def _scan(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, parenthesis depth before it), string literals skipped."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == "'":
            i = _string_end(text, i)
            continue
        yield i, c, depth
        depth += {"(": 1, ")": -1}.get(c, 0)
        i += 1


def _split_top(text: str) -> list[str]:
    """Comma-separated items at parenthesis depth 0, quotes respected."""
    cuts = [i for i, c, depth in _scan(text) if c == "," and depth == 0]
    bounds = zip([-1, *cuts], [*cuts, len(text)], strict=True)
    return [item for a, b in bounds if (item := text[a + 1 : b].strip())]


def _paren(text: str, start: int) -> tuple[str, int]:
    """The text inside the parenthesis opening at ``start``, and the index after it."""
    for i, c, depth in _scan(text, start):
        if c == ")" and depth == 1:
            return text[start + 1 : i], i + 1
    return text[start + 1 :], len(text)


CONSTRAINTS = ("constraint", "primary", "unique", "check", "foreign", "exclude")
NAME = r'"?([\w.]+)"?'


def _create(stmt: str, tables: dict[str, _Table]) -> None:
    m = re.match(
        rf"create\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?{NAME}\s*\(", stmt, re.I | re.S
    )
    if m is None:
        return
    body, _ = _paren(stmt, m.end() - 1)
    table = _Table(columns={})
    for item in _split_top(body):
        words = item.split()
        if len(words) < 2 or words[0].lower() in CONSTRAINTS:
            if re.match(r"(constraint\s+\w+\s+)?(primary\s+key|unique)", item, re.I):
                table.indexes.append(4 * max(1, item.count(",") + 1))
            continue
        name = words[0].strip('"').lower()
        table.columns[name] = re.split(r"[(\[]", words[1].lower())[0]
        if re.search(r"\bdefault\b|\bserial\b|\bbigserial\b", item, re.I):
            table.defaults.add(name)
        if re.search(r"\bprimary\s+key\b|\bunique\b", item, re.I):
            table.indexes.append(_width(table.columns[name], None) or 4)
    tables[m.group(1).lower()] = table


def _insert(stmt: str, tables: dict[str, _Table]) -> None:
    m = re.match(rf"insert\s+into\s+{NAME}\s*", stmt, re.I | re.S)
    if m is None or (table := tables.get(m.group(1).lower())) is None:
        return
    rest, cols = stmt[m.end() :], list(table.columns)
    if rest.startswith("("):
        inside, after = _paren(rest, 0)
        cols, rest = [c.strip().strip('"').lower() for c in inside.split(",")], rest[after:]
    select = re.match(r"\s*select\s+(.*)", rest, re.I | re.S)
    if select is None:
        return
    rows = 1
    for a, b in re.findall(r"generate_series\s*\(\s*(-?\d+)\s*,\s*(-?\d+)", rest, re.I):
        rows *= max(0, int(b) - int(a) + 1)
    if rows <= 1:
        return
    values = _split_top(re.split(r"\bfrom\b", select.group(1), maxsplit=1, flags=re.I)[0])
    given = dict(zip(cols, values, strict=False)) if len(values) == len(cols) else {}
    width, offset = 0, 0
    for name, type_ in table.columns.items():
        value = given.get(name) if name in cols or name in table.defaults else "NULL"
        size = _width(type_, value)
        if size:
            offset = _align(offset, TYPES.get(type_, (8, 1))[1] if type_ not in TEXT_TYPES else 1)
            offset += size
        width = offset
    table.width = max(table.width, width)
    table.rows += rows


def _index(stmt: str, tables: dict[str, _Table]) -> None:
    m = re.match(
        rf"alter\s+table\s+(?:only\s+)?{NAME}\s+add\s+(?:constraint\s+\w+\s+)?(?:primary\s+key|unique)\s*\((.*?)\)",
        stmt, re.I | re.S,
    ) or re.match(
        rf"create\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:\w+\s+)?on\s+(?:only\s+)?{NAME}\s*(?:using\s+btree\s*)?\((.*?)\)",
        stmt, re.I | re.S,
    )  # fmt: skip
    if m is None or (table := tables.get(m.group(1).lower())) is None:
        return
    keys = [k.strip().strip('"').lower() for k in m.group(2).split(",")]
    table.indexes.append(sum(_width(table.columns.get(k, "int"), None) for k in keys) or 4)


def estimate(sql: str) -> int:
    """Bytes the tables and indexes of ``sql`` take once it ran."""
    tables: dict[str, _Table] = {}
    for stmt in statements(sql):
        _create(stmt, tables)
        _insert(stmt, tables)
        _index(stmt, tables)
    return sum(t.bytes() for t in tables.values())


def of_files(paths: Iterable[Path], variables: Mapping[str, str] | None = None) -> int:
    """``estimate`` over setup files read in order (one script: tables made in
    one file are filled in the next), with psql's ``:name`` replaced by the
    workload's defines as psql sees them (seed001's ``generate_series(1, :users)``)."""
    texts = []
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue  # validation names a missing file; the plan sizes what it can read
    return estimate(substitute(";\n".join(texts), variables or {}))


# psql's :name, not a cast's ::type nor a name's part
_VARIABLE = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def substitute(sql: str, variables: Mapping[str, str]) -> str:
    """``sql`` with the psql variables it names replaced by their values; an
    unknown one stays (psql would refuse it at setup; its rows count as none)."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1), m.group(0)), sql)
