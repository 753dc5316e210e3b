"""The docs say what the code does: every campaign key table is the one its
schema renders (regenerate with scripts/campaign-keys.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.campaign import schemas
from pgrig.schema import Schema

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("schema", schemas(), ids=lambda s: s.title)
def test_campaign_keys_are_documented_as_declared(schema: Schema) -> None:
    text = (DOCS / "campaigns.md").read_text()
    block = f"<!-- keys: {schema.title} -->\n{schema.markdown()}\n<!-- /keys -->"
    assert block in text, f"run scripts/campaign-keys.py: {schema.title} differs"


def test_every_workload_has_a_documented_type() -> None:
    from pgrig import registry

    text = (DOCS / "campaigns.md").read_text()
    for kind in registry.WORKLOADS:
        assert f'<!-- keys: type = "{kind}" -->' in text
