"""ReportView -> one self-contained HTML page: pure, data in and text out.

Everything the page needs is inside it (CSS in <style>, plots as inline SVG),
so it opens offline, from a mail attachment or a CI artefact; no JavaScript.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from pgrig.document.model import FAILED, SKIPPED, Block, Details, Figure, ReportView, Section, Table


def escape(text: str) -> str:
    """Element text: "<", ">" and "&" only. Quotes need no entity outside an
    attribute, and "&#x27;" is what a pasted page showed (issue 30)."""
    return html.escape(text, quote=False)


def attr(text: str) -> str:
    """An attribute's value, inside double quotes."""
    return html.escape(text, quote=True)


# A token this long (a path, a conninfo) may break after "/" or "," in a cell;
# identifiers (pgbench_run, wal_sync_method) never break.
_LONG = re.compile(r"\S{28,}")


# A command line's long option ("--progress"): a browser would break it after
# its dashes ("--" / "progress"), so it is kept on one line.
_OPTION = re.compile(r"(?<!\S)--[A-Za-z]\S{0,24}(?!\S)")


def cell_text(text: str) -> str:
    """A table cell's text, with break opportunities only inside long tokens."""
    out = _LONG.sub(lambda m: re.sub(r"([/,])(?=.)", r"\1<wbr>", m.group(0)), escape(text))
    return _OPTION.sub(lambda m: f'<span class="nobr">{m.group(0)}</span>', out)


def render(view: ReportView, svgs: Mapping[str, str], *, css: str, generator: str = "") -> str:
    """The page. ``svgs`` maps a figure name to its inline ``<svg>`` element."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(view.title)}</title>",
        f"<style>\n{css}\n</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{escape(view.title)}</h1>",
        render_meta(view.meta),
        render_nav(view.sections),
        "</header>",
        "<main>",
        *(render_section(s, svgs) for s in view.sections),
        "</main>",
    ]
    if generator:
        parts.append(f"<footer>{escape(generator)}</footer>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


META_FOLD = 160  # characters: longer header values fold, so the conclusions fit the first screen


def render_meta(meta: tuple[tuple[str, str], ...]) -> str:
    def value(text: str) -> str:
        if len(text) <= META_FOLD:
            return escape(text)
        head = text[:META_FOLD].rsplit(" ", 1)[0]
        return f"<details><summary>{escape(head)} ...</summary>{escape(text)}</details>"

    items = "".join(f"<dt>{escape(k)}</dt><dd>{value(v)}</dd>" for k, v in meta)
    return f'<dl class="meta">{items}</dl>'


def render_nav(sections: tuple[Section, ...]) -> str:
    links = "".join(f'<li><a href="#{attr(s.anchor)}">{escape(s.title)}</a></li>' for s in sections)
    return f"<nav><ol>{links}</ol></nav>"


def render_section(section: Section, svgs: Mapping[str, str]) -> str:
    out = [f'<section id="{attr(section.anchor)}">', f"<h2>{escape(section.title)}</h2>"]
    out += [f"<p>{escape(p)}</p>" for p in section.paragraphs]
    out += [render_block(block, svgs) for block in section.blocks]
    out.append("</section>")
    return "\n".join(out)


def render_block(block: Block, svgs: Mapping[str, str]) -> str:
    if isinstance(block, Details):
        tables = [render_block(b, svgs) for b in block.blocks if not isinstance(b, Figure)]
        figures = [render_block(b, svgs) for b in block.blocks if isinstance(b, Figure)]
        # A run's plots as small multiples: side by side, half size, one glance.
        grid = ['<div class="multiples">', *figures, "</div>"] if figures else []
        inner = "\n".join(tables + grid)
        summary = f"<summary>{escape(block.summary)}</summary>"
        return f'<details class="fold">{summary}\n{inner}\n</details>'
    if isinstance(block, Table):
        return render_table(block)
    return render_figure(block, svgs.get(block.name))


def render_figure(fig: Figure, svg: str | None) -> str:
    body = svg if svg is not None else f'<p class="missing">{escape(fig.title)}: no plot</p>'
    caption = f"<figcaption>{escape(fig.caption)}</figcaption>" if fig.caption else ""
    return f'<figure class="plot">\n{body}\n{caption}</figure>'


def _spanned(cells: tuple[str, ...]) -> str:
    """A failed/skipped row: each reason spans the empty cells after it, so a long
    reason does not squeeze the number columns of the rows that did run."""
    texts: list[str] = []
    spans: list[int] = []
    for text in cells:
        if text or not texts:
            texts.append(text)
            spans.append(1)
        else:
            spans[-1] += 1
    out = []
    for text, span in zip(texts, spans, strict=True):
        span_attr = f' colspan="{span}"' if span > 1 else ""
        out.append(f"<td{span_attr}>{cell_text(text)}</td>")
    return "".join(out)


def render_table(table: Table) -> str:
    num = [i > 0 and i < len(table.numeric) and table.numeric[i] for i in range(len(table.columns))]

    def cell(tag: str, i: int, text: str, mark: str = "") -> str:
        classes = " ".join(c for c in ("num" if num[i] else "", mark) if c)
        cls = f' class="{classes}"' if classes else ""
        return f"<{tag}{cls}>{cell_text(text)}</{tag}>"

    head = "".join(cell("th", i, c) for i, c in enumerate(table.columns))
    rows = []
    for row in table.rows:
        cls = f' class="{row.kind}"' if row.kind else ""
        if row.kind in (FAILED, SKIPPED):
            cells = _spanned(row.cells)
        else:
            cells = "".join(cell("td", i, c, row.mark(i)) for i, c in enumerate(row.cells))
        rows.append(f"<tr{cls}>{cells}</tr>")
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    if table.collapsed:
        caption = ""
    html = (
        f'<div class="table-wrap"><table class="data">{caption}<thead><tr>{head}</tr></thead>\n'
        f"<tbody>\n" + "\n".join(rows) + "\n</tbody></table></div>"
    )
    if table.notes:
        notes = "".join(f"<li>{escape(n)}</li>" for n in table.notes)
        html += f'\n<ul class="notes">{notes}</ul>'
    if table.collapsed:
        summary = escape(table.caption or "Details")
        html = f"<details><summary>{summary}</summary>\n{html}\n</details>"
    return html
