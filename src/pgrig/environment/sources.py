"""Reading the facts: files under /proc and /sys that may be missing or unreadable.

A capture reads the files it parses in one pass (``read_files``, or the snapshot
of ``pgrig.environment.remote`` on another host) into ``Files``; the parsers of
each concern (``cpu``, ``storage``, ``system``) then read only those texts. A
``root`` directory (default ``/``) lets tests point the reading at copies of
``/proc`` and ``/sys`` captured from a real machine.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/")

VERSION_TIMEOUT = 10.0
"""Seconds for a program asked about itself (``--version``, ``lscpu``)."""


def sys_path(root: Path, path: str) -> Path:
    """``path`` (absolute, e.g. ``/proc/meminfo``) under ``root``."""
    return root / path.lstrip("/")


def read_text(path: Path) -> str | None:
    """A file's text, or None when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


@dataclass(frozen=True)
class Files:
    """One host's files as the parsers read them: each file's text, stripped, by
    its absolute path (a missing or unreadable file is absent), and where the
    ``/sys/dev/block`` links of the paths under test lead (another host's only:
    here the links are followed where they are, ``storage.block_device_for``)."""

    texts: Mapping[str, str]
    links: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # -> (dir, partition?)


def read_files(root: Path, patterns: Sequence[str]) -> Files:
    """The files ``patterns`` (absolute globs) name under ``root``, in one pass."""
    texts: dict[str, str] = {}
    for pattern in patterns:
        for found in glob.glob(os.path.join(glob.escape(str(root)), pattern.lstrip("/"))):
            text = read_text(Path(found))
            if text is not None:
                texts["/" + os.path.relpath(found, root)] = text.strip()
    return Files(texts)


def normalize_space(text: str) -> str:
    """``"32000\\t1024000000\\t500\\n"`` -> ``"32000 1024000000 500"``."""
    return " ".join(text.split())


def bracketed(text: str) -> str | None:
    """The active choice in a sysfs menu such as ``"always [madvise] never"``."""
    match = re.search(r"\[([^\]]+)\]", text)
    if match:
        return match.group(1)
    # Some devices offer only one choice and print it without brackets ("none").
    words = text.split()
    return words[0] if len(words) == 1 else None
