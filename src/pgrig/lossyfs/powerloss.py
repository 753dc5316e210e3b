"""What a power loss leaves on the disk: the synced state plus, optionally, some of
the unsynced pages (a disk writes back its cache in no particular order) or a
torn page (only a prefix of a page reached the platter).

The choice is made by a seeded RNG over the unsynced pages sorted by backing
path and offset, so the same state and seed give the same outcome.
"""

from __future__ import annotations

import fnmatch
import os
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pgrig.lossyfs.nodes import File
from pgrig.lossyfs.volume import Volume

Mode = Literal["drop", "random-subset", "torn"]
MODES: tuple[Mode, ...] = ("drop", "random-subset", "torn")
LISTED = 200  # persisted pages named in a report, at most


@dataclass(frozen=True)
class PowerLossReport:
    """What the power loss kept and dropped. Paths are relative to the mount root
    as they exist after the power loss (the backing tree)."""

    mode: str
    seed: int
    page_size: int
    unsynced_pages: int  # cached pages of files that have a durable name
    persisted_pages: int  # of those, written to the backing file
    lost_files: int  # files with unsynced data and no durable name: gone entirely
    unsynced_dirs: int  # directories whose entries reverted
    torn: tuple[str, int, int] | None = None  # (path, offset, bytes persisted)
    persisted: tuple[tuple[str, int, int], ...] = field(default=())  # first LISTED

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PowerLossReport:
        torn = data.get("torn")
        return cls(
            **{k: data[k] for k in INT_FIELDS},
            mode=str(data["mode"]),
            torn=(str(torn[0]), int(torn[1]), int(torn[2])) if torn else None,
            persisted=tuple((str(p), int(o), int(n)) for p, o, n in data.get("persisted") or ()),
        )


INT_FIELDS = (
    "seed",
    "page_size",
    "unsynced_pages",
    "persisted_pages",
    "lost_files",
    "unsynced_dirs",
)


def cut_power(
    volume: Volume,
    mode: Mode,
    *,
    seed: int,
    keep_fraction: float = 0.5,
    torn_bytes: int | None = None,
    only: str | None = None,
) -> PowerLossReport:
    """Write what survives into the backing tree and report it. The caller must stop
    serving the mount first: after this the in-memory state is meaningless."""
    if mode not in MODES:
        raise ValueError(f"power loss mode {mode!r} is not one of {MODES}")
    if not 0.0 <= keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction {keep_fraction} is not between 0 and 1")
    psize = volume.page_size
    torn_len = psize // 2 if torn_bytes is None else torn_bytes
    if not 0 < torn_len < psize:
        raise ValueError(f"torn_bytes {torn_len} must be between 1 and {psize - 1}")
    backing = volume.backing

    candidates: list[tuple[str, int, File]] = []
    lost = 0
    for node in backing.dirty_files:
        if not node.durable_names:
            lost += 1
            continue
        rel = backing.relpath(node)
        assert rel is not None
        for index in node.pages:
            candidates.append((rel, index, node))
    candidates.sort(key=lambda c: (c[0], c[1]))
    eligible = [c for c in candidates if only is None or fnmatch.fnmatch(c[0], only)]

    rng = random.Random(seed)
    keep: list[tuple[str, int, File]] = []
    torn: tuple[str, int, int] | None = None
    if mode == "random-subset":
        keep = [c for c in eligible if rng.random() < keep_fraction]
    elif mode == "torn" and eligible:
        rel, index, node = eligible[rng.randrange(len(eligible))]
        extent = min(node.page_extent(index), torn_len)
        fd = backing.open_file(node)
        assert fd is not None
        os.pwrite(fd, memoryview(node.pages[index])[:extent], index * psize)
        os.fsync(fd)
        torn = (rel, index * psize, extent)

    synced: set[File] = set()
    for _rel, index, node in keep:
        fd = backing.open_file(node)
        assert fd is not None
        extent = node.page_extent(index)
        os.pwrite(fd, memoryview(node.pages[index])[:extent], index * psize)
        synced.add(node)
    for node in synced:
        assert node.fd is not None
        os.fsync(node.fd)

    return PowerLossReport(
        mode=mode,
        seed=seed,
        page_size=psize,
        unsynced_pages=len(candidates),
        persisted_pages=len(keep) + (1 if torn else 0),
        lost_files=lost,
        unsynced_dirs=sum(1 for d in backing.dirs() if d.dirty),
        torn=torn,
        persisted=tuple((rel, index * psize, node.page_extent(index)) for rel, index, node in keep)[
            :LISTED
        ],
    )
