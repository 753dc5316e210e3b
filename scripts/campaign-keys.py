#!/usr/bin/env python3
"""Rewrite the docs' campaign key tables from the schemas in the code: the same
tables ``pgrig keys NAME`` prints (``pgrig.campaign.key_tables``).

Each table sits between ``<!-- keys: TITLE -->`` and ``<!-- /keys -->`` in one
page of docs/ (docs/campaigns.md for pgrig's own tables and workloads,
docs/hosts.md for the remote target kind); tests/test_docs.py fails when a
table and its schema differ. A plug-in's tables are printed by ``pgrig keys``;
only those with a block in docs/ are written here.
Usage: .venv/bin/python scripts/campaign-keys.py
"""

from __future__ import annotations

import re
from pathlib import Path

from pgrig import registry
from pgrig.campaign import key_tables

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main() -> None:
    pages = {page: page.read_text() for page in sorted(DOCS.glob("*.md"))}
    parts = {**registry.target_kinds(), **registry.workloads()}
    others = {n for n, part in parts.items() if not type(part).__module__.startswith("pgrig.")}
    for name, schema in key_tables().items():
        block = re.compile(
            rf"(<!-- keys: {re.escape(schema.title)} -->\n).*?(<!-- /keys -->)", re.DOTALL
        )
        found = [page for page, text in pages.items() if block.search(text)]
        if not found:
            if name in others:
                continue  # another package's plug-in: pgrig keys prints it
            raise SystemExit(f"docs/: no block <!-- keys: {schema.title} --> for its table")
        for page in found:
            pages[page] = block.sub(
                lambda m, s=schema: m.group(1) + s.markdown() + "\n" + m.group(2), pages[page]
            )
    for page, text in pages.items():
        if page.read_text() != text:
            page.write_text(text)


if __name__ == "__main__":
    main()
