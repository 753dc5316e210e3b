"""Reading the facts: files under /proc and /sys that may be missing or unreadable.

Every reader takes a ``root`` directory (default ``/``) so that tests can point
it at copies of ``/proc`` and ``/sys`` captured from a real machine.
"""

from __future__ import annotations

import re
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


def read_line(path: Path) -> str | None:
    """A one-line file's stripped text, or None when it is missing or empty."""
    text = read_text(path)
    if text is None:
        return None
    text = text.strip()
    return text or None


def read_int(path: Path) -> int | None:
    text = read_line(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


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
