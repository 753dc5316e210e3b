"""The settings that change what a number means, said next to the number.

A read-write tps measured with ``synchronous_commit = off`` (the ``oltp``
profile, as the seeds run it) counts commits that return before their WAL
reaches the disk: it is not bounded by the fdatasync rate the probes measured,
and a crash loses the last of them. ``fsync = off`` and ``full_page_writes =
off`` trade crash safety for speed the same way; ``shared_buffers`` decides
what is served from memory. The report prints these beside the tps they
affect, and the console at the start of a study.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# In the order they are printed; PostgreSQL's defaults for those not set.
DEFAULTS: dict[str, str] = {
    "synchronous_commit": "on",
    "fsync": "on",
    "full_page_writes": "on",
    "shared_buffers": "128MB",
}

# What a non-durable value does to write throughput.
_CAVEATS: dict[tuple[str, str], str] = {
    ("synchronous_commit", "off"): "commits return before their WAL is flushed (a crash "
    "loses the last ones), so write tps is not bounded by the fdatasync rate",
    ("fsync", "off"): "nothing is flushed to disk (a crash can corrupt the cluster)",
    ("full_page_writes", "off"): "no full pages in the WAL after a checkpoint (a crash can "
    "leave torn pages)",
}


@dataclass(frozen=True)
class Meaning:
    """The settings of one server that change what its numbers mean."""

    profile: str | None  # None: an existing server, configured by its owner
    values: tuple[tuple[str, str], ...]  # (name, value) in DEFAULTS' order
    defaulted: tuple[str, ...] = ()  # names not set: PostgreSQL's default applies

    @classmethod
    def of(cls, settings: Mapping[str, str], profile: str | None) -> Meaning:
        """From a server's non-default settings (or a profile's): absent ones are
        PostgreSQL's defaults."""
        values = tuple((name, settings.get(name, default)) for name, default in DEFAULTS.items())
        return cls(profile, values, tuple(n for n in DEFAULTS if n not in settings))

    @property
    def settings(self) -> dict[str, str]:
        return dict(self.values)

    def line(self) -> str:
        """'profile oltp: synchronous_commit=off, fsync=on, full_page_writes=on,
        shared_buffers=6026MB'."""
        where = f"profile {self.profile}" if self.profile else "existing server"
        return f"{where}: " + ", ".join(f"{k}={v}" for k, v in self.values)

    def caveats(self) -> list[str]:
        """'synchronous_commit=off: commits return before ...' for each setting
        that makes writes less than durable; empty when every commit is."""
        return [
            f"{name}={value}: {_CAVEATS[(name, value.lower())]}"
            for name, value in self.values
            if (name, value.lower()) in _CAVEATS
        ]

    def writes_note(self) -> str:
        """The short note beside a read-write tps: 'synchronous_commit=off' (or
        '' when commits are durable)."""
        return ", ".join(
            f"{name}={value}" for name, value in self.values if (name, value.lower()) in _CAVEATS
        )
