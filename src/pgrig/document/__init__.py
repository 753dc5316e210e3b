"""The report as a document: its parts (``model``: sections, tables, rows,
figures) and how numbers are written (``fmt``). Plug-ins build their report
sections from these; the report's composition (``pgrig.report``) reads the
registry and puts the sections together. Imports nothing of pgrig above it."""
