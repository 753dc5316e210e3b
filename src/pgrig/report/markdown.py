"""ReportView -> GitHub-flavoured Markdown: pure, data in and text out."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pgrig.document.model import (
    BETTER,
    HEADLINE,
    QUIET,
    WORSE,
    Block,
    Details,
    Figure,
    ReportView,
    Row,
    Section,
    Table,
)

# Only what GitHub would read as markup is escaped, and with a backslash, never
# an HTML entity: the same Markdown goes into plain-text tickets, where
# "p &lt; 0.05" or "\\`pgrig audit -v\\`" would show literally. A "<" before a
# letter or "/" opens an HTML tag ("/proc/<pid>/io"); "p < 0.05" does not.
_MARKUP = re.compile(
    r"""
      \\(?=[!-/:-@[-`{-~])          # a backslash before punctuation would escape it
    | \|                            # a table cell's border
    | \*                            # emphasis; count(*) too, to be safe
    | (?<![A-Za-z0-9])_|_(?![A-Za-z0-9])  # emphasis (pg_test_fsync's are literal)
    | <(?=[A-Za-z/!?])               # an HTML tag
    | &(?=\#?[A-Za-z0-9]+;)          # an entity
    | \[(?=[^\]]*\][(\[])           # a link: [text](url) or [text][ref]
    """,
    re.VERBOSE,
)


def escape(text: str) -> str:
    """Plain text made safe for a Markdown paragraph or table cell. Backticks stay:
    "`pgrig audit -v`" is meant as code."""
    return _MARKUP.sub(lambda m: "\\" + m.group(0), text.replace("\n", " "))


_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def summary_text(text: str) -> str:
    """Text for a ``<summary>``: HTML, where a backslash escapes nothing. Only a
    "<" that would open a tag becomes an entity; quotes and "&" stay as typed (a
    "&#x27;" showed raw in a ticket, issue 30)."""
    return _TAG.sub("&lt;", text.replace("\n", " "))


def render(view: ReportView, images: Mapping[str, str]) -> str:
    """The whole report. ``images`` maps a figure name to the relative path of
    its image file (an ``.svg``: GitHub strips an ``<svg>`` written inline in
    Markdown); a figure without one is left out."""
    out = [f"# {escape(view.title)}", ""]
    out += [f"- **{escape(label)}:** {escape(value)}" for label, value in view.meta]
    for section in view.sections:
        out += ["", *render_section(section, images)]
    return "\n".join(out).rstrip() + "\n"


def render_section(section: Section, images: Mapping[str, str]) -> list[str]:
    out = [f"## {escape(section.title)}"]
    for para in section.paragraphs:
        out += ["", escape(para)]
    for block in section.blocks:
        out += render_block(block, images)
    return out


def render_block(block: Block, images: Mapping[str, str]) -> list[str]:
    if isinstance(block, Details):
        # GitHub renders <details>; the blank lines let the Markdown inside parse.
        inner = [line for b in block.blocks for line in render_block(b, images)]
        missing = [b.title for b in block.blocks if isinstance(b, Figure) and b.name not in images]
        if missing:
            inner += ["", f"*Plots in the HTML report: {escape(', '.join(missing))}.*"]
        return ["", f"<details><summary>{summary_text(block.summary)}</summary>", *inner, "",
                "</details>"]  # fmt: skip
    if isinstance(block, Table):
        return ["", *render_table(block)]
    if block.name in images:
        return ["", *render_figure(block, images[block.name])]
    return []


def render_figure(fig: Figure, path: str) -> list[str]:
    out = [f"![{escape(fig.title)}]({path})"]
    if fig.caption:
        out += ["", f"*{escape(fig.caption)}*"]
    return out


def render_table(table: Table) -> list[str]:
    body = [_row(tuple(escape(c) for c in table.columns))]
    body.append(_row(tuple(_align(table, i) for i in range(len(table.columns)))))
    body += [_row(_cells(row)) for row in table.rows]
    notes = [f"- {escape(n)}" for n in table.notes]
    if table.collapsed:
        # GitHub renders <details> in Markdown; the blank lines let the table inside parse.
        summary = summary_text(table.caption or "Details")
        out = [f"<details><summary>{summary}</summary>", "", *body]
        if notes:
            out += ["", *notes]
        return [*out, "", "</details>"]
    out = [f"**{escape(table.caption)}**", ""] if table.caption else []
    out += body
    if notes:
        out += ["", *notes]
    return out


def _cells(row: Row) -> tuple[str, ...]:
    cells = tuple(escape(c) for c in row.cells)
    out = []
    for i, c in enumerate(cells):
        mark = row.mark(i)
        if c and mark == QUIET:  # within noise stays quiet, in a headline row too
            c = f"*{c}*"
        elif c and (row.kind == HEADLINE or mark in (BETTER, WORSE)):
            c = f"**{c}**"
        out.append(c)
    return tuple(out)


def _align(table: Table, i: int) -> str:
    numeric = i > 0 and i < len(table.numeric) and table.numeric[i]
    return "---:" if numeric else "---"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"
