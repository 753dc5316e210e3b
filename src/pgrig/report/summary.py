"""The ticket-sized summary: ``<stem>.summary.md`` beside the full report.

GitHub cuts a comment at 65,536 characters; the full Markdown of a study of a
few hundred runs is 97k-134k. The summary keeps what a ticket needs: the
header, the report's first screen (its answer, or the conclusions), the
Performance Summary table and the exact command lines that ran, and is cut to
``LIMIT`` characters - the longest table's rows first, then the command lines -
saying each time what was left out and where it is."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from pgrig.document.model import Details, ReportView, Section, Table
from pgrig.report import markdown

LIMIT = 60_000  # characters: under GitHub's 65,536 with room for a line of context
# The sections a ticket needs, besides the report's first (its answer).
WANTED = ("answer", "conclusions", "summary")


def render(
    view: ReportView,
    images: Mapping[str, str],
    full: str,
    commands: Sequence[tuple[str, str]] = (),
    again: Sequence[str] = (),
) -> str:
    """The summary of ``view``; ``full`` names the full report's file, for what
    was left out; ``commands``: (run key, command line) in the order they ran;
    ``again``: how to run the study again (Markdown lines), in their place."""
    chosen = [s for i, s in enumerate(view.sections) if i == 0 or s.anchor in WANTED]
    sections = [_unfolded(s) for s in chosen]
    head = [f"# {markdown.escape(view.title)}", ""]
    head += [f"- **{markdown.escape(k)}:** {markdown.escape(v)}" for k, v in view.meta]
    head += ["", f"*The summary of {full}: every table, plot and run is there.*"]
    shown: dict[tuple[int, int], int] = {}
    while True:
        trimmed = [_trimmed(s, i, shown, full) for i, s in enumerate(sections)]
        body = [line for s in trimmed for line in ["", *markdown.render_section(s, images)]]
        text = "\n".join(head + body)
        longest = _longest(trimmed) if len(text) >= LIMIT else None
        if longest is None:
            break
        where, rows = longest
        shown[where] = rows // 2
    room = LIMIT - len(text) - 1
    if again and sum(len(x) + 1 for x in again) < room:
        tail = list(again)
    else:
        tail = _commands(commands, room, full)
    return (text + "\n" + "\n".join(tail)).rstrip() + "\n"


def _unfolded(section: Section) -> Section:
    """The section without its folded evidence (``Details``): a ticket links to it."""
    blocks = tuple(b for b in section.blocks if not isinstance(b, Details))
    return dataclasses.replace(section, blocks=blocks)


def _trimmed(section: Section, i: int, shown: dict[tuple[int, int], int], full: str) -> Section:
    """The section with each cut table's first rows and a note saying so."""
    blocks = list(section.blocks)
    for j, b in enumerate(blocks):
        n = shown.get((i, j))
        if isinstance(b, Table) and n is not None:
            note = f"The first {n} of {len(b.rows)} rows here; all of them are in {full}."
            blocks[j] = dataclasses.replace(b, rows=b.rows[:n], notes=(*b.notes, note))
    return dataclasses.replace(section, blocks=tuple(blocks))


def _longest(sections: Sequence[Section]) -> tuple[tuple[int, int], int] | None:
    """The longest table as drawn now, to halve: where it is (its section's and
    its block's index) and its rows; None when no table has more than one row left."""
    best: tuple[int, tuple[int, int], int] | None = None
    for i, s in enumerate(sections):
        for j, b in enumerate(s.blocks):
            if isinstance(b, Table) and len(b.rows) > 1:
                size = sum(len(c) for r in b.rows for c in r.cells)
                if best is None or size > best[0]:
                    best = (size, (i, j), len(b.rows))
    return None if best is None else (best[1], best[2])


def _commands(commands: Sequence[tuple[str, str]], room: int, full: str) -> list[str]:
    """The command lines as one code block, as many as fit in ``room``."""
    if not commands:
        return []
    out = ["", "## Commands run", "", "```"]
    used = sum(len(x) + 1 for x in out) + 200  # the closing fence and a note
    shown = 0
    for key, line in commands:
        entry = [f"# {key}", line]
        cost = sum(len(x) + 1 for x in entry)
        if used + cost > room:
            break
        out += entry
        used += cost
        shown += 1
    out.append("```")
    if shown < len(commands):
        out += ["", f"*{len(commands) - shown} more command lines are in {full} (All runs).*"]
    return out
