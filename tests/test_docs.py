"""The docs say what the code does: every campaign key table is the one its
schema renders (regenerate with scripts/campaign-keys.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pgrig.campaign import schemas
from pgrig.schema import Schema

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("schema", schemas(), ids=lambda s: s.title)
def test_campaign_keys_are_documented_as_declared(schema: Schema) -> None:
    """Each table as ``pgrig keys`` prints it, in one page of docs/."""
    text = "".join(page.read_text() for page in sorted(DOCS.glob("*.md")))
    block = f"<!-- keys: {schema.title} -->\n{schema.markdown()}\n<!-- /keys -->"
    assert block in text, f"run scripts/campaign-keys.py: {schema.title} differs"


def test_every_workload_has_a_documented_type() -> None:
    from pgrig import registry

    text = (DOCS / "campaigns.md").read_text()
    for kind in registry.WORKLOADS:
        assert f'<!-- keys: type = "{kind}" -->' in text


def test_relative_links_stay_inside_the_repository() -> None:
    """A clone has only the repository: every relative link of the README and
    the docs names a file in it (the README once pointed at ../shared/seeds/)."""
    root = DOCS.parent
    broken = []
    for page in [root / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path = (page.parent / target).resolve()
            if not path.is_relative_to(root) or not path.exists():
                broken.append(f"{page.relative_to(root)}: {target}")
    assert broken == []
    readme = (root / "README.md").read_text()
    assert "shared/seeds" not in readme
