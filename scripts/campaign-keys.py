#!/usr/bin/env python3
"""Rewrite the key tables of docs/campaigns.md from the schemas in the code.

Each table sits between ``<!-- keys: TITLE -->`` and ``<!-- /keys -->``;
tests/test_docs.py fails when a table and its schema differ.
Usage: .venv/bin/python scripts/campaign-keys.py
"""

from __future__ import annotations

import re
from pathlib import Path

from pgrig.campaign import schemas

DOC = Path(__file__).resolve().parent.parent / "docs" / "campaigns.md"


def main() -> None:
    text = DOC.read_text()
    for schema in schemas():
        block = re.compile(
            rf"(<!-- keys: {re.escape(schema.title)} -->\n).*?(<!-- /keys -->)", re.DOTALL
        )
        if not block.search(text):
            raise SystemExit(f"{DOC}: no block <!-- keys: {schema.title} --> for its table")
        text = block.sub(lambda m, s=schema: m.group(1) + s.markdown() + "\n" + m.group(2), text)
    DOC.write_text(text)


if __name__ == "__main__":
    main()
