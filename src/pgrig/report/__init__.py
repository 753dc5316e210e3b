"""Markdown and self-contained HTML reports of a study, drawn from stored records.

Only reads records: nothing here measures. ``writer.write`` is the entry point;
the pieces (``view.build``, ``markdown.render``, ``html.render``) are pure and
can be used on their own. ``model`` and ``fmt`` are what workloads' own report
sections build on, so this package imports nothing itself.
"""
