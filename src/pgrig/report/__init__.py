"""Markdown and self-contained HTML reports of a study, drawn from stored records.

Only reads records: nothing here measures. ``write`` is the entry point; the
pieces (``view.build``, ``markdown.render``, ``html.render``) are pure and can
be used on their own.
"""

from __future__ import annotations

from pgrig.report.writer import write

__all__ = ["write"]
