"""What a power loss leaves on the disk: the synced state plus, optionally, some of
the unsynced pages (a disk writes back its cache in no particular order) or a
torn page (only a prefix of a page reached the platter).

The choice is made by a seeded RNG over the unsynced pages sorted by backing
path and offset, so the same state and seed give the same outcome. A torn write
is drawn first among the pages whose prefix would change what the disk holds
(and, with ``prefer``, among those whose path matches it): tearing a page into
the bytes it already had, or a file nobody reads back, tests nothing.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pgrig.lossyfs.backing import Backing
from pgrig.lossyfs.nodes import File
from pgrig.lossyfs.volume import Volume
from pgrig.results import JsonValue

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
    # Of the torn prefix, the bytes that differ from what the disk had within the
    # file (0: the tear left every existing byte as it was), and a digest of the
    # page as the tear left it (``torn_digest``): a different digest later means
    # something rewrote it.
    torn_changed: int = 0
    torn_digest: str | None = None

    def to_json(self) -> dict[str, JsonValue]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PowerLossReport:
        torn = data.get("torn")
        digest = data.get("torn_digest")
        return cls(
            **{k: data[k] for k in INT_FIELDS},
            mode=str(data["mode"]),
            torn=(str(torn[0]), int(torn[1]), int(torn[2])) if torn else None,
            persisted=tuple((str(p), int(o), int(n)) for p, o, n in data.get("persisted") or ()),
            torn_changed=int(data.get("torn_changed") or 0),
            torn_digest=str(digest) if digest else None,
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
    prefer: str | None = None,
) -> PowerLossReport:
    """Write what survives into the backing tree and report it. The caller must stop
    serving the mount first: after this the in-memory state is meaningless.

    ``prefer`` (a regular expression over the relative path): the torn page is
    drawn among the matching pages first."""
    if mode not in MODES:
        raise ValueError(f"power loss mode {mode!r} is not one of {MODES}")
    if not 0.0 <= keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction {keep_fraction} is not between 0 and 1")
    psize = volume.page_size
    torn_len = psize // 2 if torn_bytes is None else torn_bytes
    if not 0 < torn_len < psize:
        raise ValueError(f"torn_bytes {torn_len} must be between 1 and {psize - 1}")
    backing = volume.backing

    candidates, lost = _unsynced(backing)
    eligible = [c for c in candidates if only is None or fnmatch.fnmatch(c[0], only)]

    rng = random.Random(seed)
    keep: list[tuple[str, int, File]] = []
    torn: tuple[str, int, int] | None = None
    changed = 0
    digest = None
    if mode == "random-subset":
        keep = [c for c in eligible if rng.random() < keep_fraction]
    elif mode == "torn" and eligible:
        pool = _torn_pool(backing, eligible, torn_len, prefer)
        rel, index, node = pool[rng.randrange(len(pool))]
        extent = min(node.page_extent(index), torn_len)
        fd = backing.open_file(node)
        assert fd is not None
        changed = _changed(fd, node, index, extent)
        os.pwrite(fd, memoryview(node.pages[index])[:extent], index * psize)
        os.fsync(fd)
        torn = (rel, index * psize, extent)
        digest = hashlib.sha256(os.pread(fd, psize, index * psize)).hexdigest()

    _persist(backing, keep)
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
        torn_changed=changed,
        torn_digest=digest,
    )


def _unsynced(backing: Backing) -> tuple[list[tuple[str, int, File]], int]:
    """The cached pages not yet on the backing files, as (path, page, file) in
    path and page order; and how many files were lost whole (no durable name)."""
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
    return candidates, lost


def _persist(backing: Backing, keep: list[tuple[str, int, File]]) -> None:
    """The pages that made it to the disk before the power went, written and synced."""
    synced: set[File] = set()
    for _rel, index, node in keep:
        fd = backing.open_file(node)
        assert fd is not None
        extent = node.page_extent(index)
        os.pwrite(fd, memoryview(node.pages[index])[:extent], index * node.page_size)
        synced.add(node)
    for node in synced:
        assert node.fd is not None
        os.fsync(node.fd)


def _changed(fd: int, node: File, index: int, extent: int) -> int:
    """Bytes of the first ``extent`` of cached page ``index`` that differ from the
    backing file's. Bytes past its end do not count: a tear there only extends the
    file, and no reader (PostgreSQL replays a new page without reading it) saw
    what was there before."""
    old = os.pread(fd, extent, index * node.page_size)
    new = bytes(memoryview(node.pages[index])[: len(old)])
    if old == new:
        return 0
    return sum(1 for a, b in zip(old, new, strict=True) if a != b)


def _differs(fd: int, node: File, index: int, extent: int) -> bool:
    old = os.pread(fd, extent, index * node.page_size)
    return old != memoryview(node.pages[index])[: len(old)]


def _torn_pool(
    backing: Backing, eligible: list[tuple[str, int, File]], torn_len: int, prefer: str | None
) -> list[tuple[str, int, File]]:
    """The pages a torn write is drawn from: preferred ones whose tear changes the
    disk, else any whose tear changes it, else every eligible page."""
    pattern = re.compile(prefer) if prefer else None
    preferred = [c for c in eligible if pattern is None or pattern.search(c[0])]
    for pool in (preferred, eligible):
        changing = []
        for c in pool:
            fd = backing.open_file(c[2])
            extent = min(c[2].page_extent(c[1]), torn_len)
            if fd is not None and extent and _differs(fd, c[2], c[1], extent):
                changing.append(c)
        if changing:
            return changing
    return eligible
