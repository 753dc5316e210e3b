"""Targets run side by side (interleaved): what their data fills of their shared
buffers must fit this machine's memory together, refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import campaign, plan, validate
from pgrig.errors import MemoryShortfall

GiB = 2**30


def _checked(tmp_path: Path, scale: int, shared: str) -> validate.Checked:
    camp_file = tmp_path / "m.toml"
    targets = "".join(
        f'[[target]]\nname = "{name}"\ndirectory = "{tmp_path}"\n'
        f'[target.set]\nshared_buffers = "{shared}"\n'
        for name in ("a", "b")
    )
    camp_file.write_text(
        '[campaign]\nname = "m"\n[probes]\ntiming = false\nfsync = false\nfio = false\n'
        f"{targets}"
        f'[[workload]]\ntype = "tpcb"\nscales = [{scale}]\nclients = [1]\nduration = 1\n'
    )
    return validate.campaign(campaign.load(camp_file), planning=True)


def test_buffers_the_data_fills_together_beyond_the_memory_are_refused(disk_dir: Path) -> None:
    checked = _checked(disk_dir, scale=10, shared="1GB")
    camp = campaign.load(disk_dir / "m.toml")
    needs = plan.disk_needs(camp)
    uses = {t.name: validate.memory_use(t, needs[t.name]) for t in checked.targets}
    # scale 10's disk estimate (tables, indexes, WAL: an upper bound of what it can
    # fill) is under the 1 GB of buffers each: that much is counted, not the 1 GB
    for held, used in uses.values():
        assert held == GiB and 150 * 2**20 < used < GiB
    filled = sum(used for _, used in uses.values())
    with pytest.raises(MemoryShortfall) as err:
        validate.memory_check(checked.targets, needs, "m.toml", ram=int(filled / 0.95))
    assert err.value.exit_code == 5
    assert "targets a and b run side by side" in err.value.message
    assert "shared_buffers" in (err.value.hint or "")
    # The same buffers with room for what the data fills: a warning that they could
    # not all be filled together, not a refusal.
    warning = validate.memory_check(checked.targets, needs, "m.toml", ram=int(filled * 2))
    assert warning is not None and "add up to 2.0 GiB" in warning
