"""Fold per-run evidence away: a page a reader can scroll.

A section that lists, run after run, a collapsed table followed by its
figures (the monitor's medians and plots of every measured run) becomes one
``Details`` per run: the table and its figures behind a single summary line.
Forty-eight runs of four plots each otherwise make the HTML page some
25,000 px tall. A section that already folds its blocks is left as it is.
"""

from __future__ import annotations

from dataclasses import replace

from pgrig.document.model import Block, Details, Figure, Section, Table


def fold_runs(section: Section) -> Section:
    """Each collapsed table and the figures after it -> one ``Details``."""
    blocks: list[Block] = []
    group: list[Table | Figure] | None = None
    summary = ""

    def close() -> None:
        if group is not None:
            blocks.append(Details(summary, tuple(group)))

    for block in section.blocks:
        if isinstance(block, Table) and block.collapsed:
            close()
            summary = block.caption or "Details"
            # Inside the fold the table shows at once: one click, not two.
            group = [Table(block.columns, block.rows, "", block.notes, block.numeric)]
        elif isinstance(block, Figure) and group is not None:
            group.append(block)
        else:
            close()
            group = None
            blocks.append(block)
    close()
    if len(blocks) == len(section.blocks):
        return section
    return Section(section.title, section.anchor, section.paragraphs, tuple(blocks))


def retitled(section: Section, title: str, suffix: str) -> Section:
    """The same section under another title; figure names made unique (they name files)."""
    tag = suffix.replace("-", "_")

    def renamed(b: Table | Figure) -> Table | Figure:
        return replace(b, name=f"{b.name}_{tag}") if isinstance(b, Figure) else b

    blocks = tuple(
        replace(b, blocks=tuple(map(renamed, b.blocks))) if isinstance(b, Details) else renamed(b)
        for b in section.blocks
    )
    return replace(section, title=title, anchor=f"{section.anchor}-{suffix}", blocks=blocks)
