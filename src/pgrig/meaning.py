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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgrig.results import Study

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


# Settings every server has its own value of (its paths, its socket, sizes
# derived from others): never a difference between two targets' configurations.
PER_SERVER = frozenset({
    "config_file", "data_directory", "hba_file", "ident_file", "external_pid_file",
    "unix_socket_directories", "port", "shared_memory_size", "shared_memory_size_in_huge_pages",
})  # fmt: skip


@dataclass(frozen=True)
class Meaning:
    """The settings of one server that change what its numbers mean."""

    profile: str | None  # None: an existing server, configured by its owner
    values: tuple[tuple[str, str], ...]  # (name, value) in DEFAULTS' order
    defaulted: tuple[str, ...] = ()  # names not set: PostgreSQL's default applies
    # Every other non-default setting the server reported (PER_SERVER left out):
    # what tells two targets' configurations apart beyond the four above.
    rest: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, settings: Mapping[str, str], profile: str | None) -> Meaning:
        """From a server's non-default settings (or a profile's): absent ones are
        PostgreSQL's defaults."""
        values = tuple((name, settings.get(name, default)) for name, default in DEFAULTS.items())
        rest = tuple(
            sorted((k, v) for k, v in settings.items() if k not in DEFAULTS and k not in PER_SERVER)
        )
        return cls(profile, values, tuple(n for n in DEFAULTS if n not in settings), rest)

    def differences(self, base: Meaning) -> list[str]:
        """'wal_compression=pglz (off on the baseline: its default)' for each
        setting whose value differs from ``base``'s, the four first; [] when none."""
        mine, theirs = dict(self.values + self.rest), dict(base.values + base.rest)
        out = []
        for name in dict.fromkeys([*mine, *theirs]):
            a, b = mine.get(name), theirs.get(name)
            if a != b:
                out.append(f"{name}={a if a is not None else 'default'}")
        return out

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

    def said(self, target: str) -> tuple[str, list[str]]:
        """What the console says at the start of a study: the settings line of
        ``target``, and a note for each setting that makes writes less than
        durable ('read-write tps with synchronous_commit=off: ...')."""
        return f"{target}: {self.line()}", [f"read-write tps with {c}" for c in self.caveats()]

    def unsafe(self) -> list[str]:
        """['synchronous_commit=off'] for each setting that makes writes less
        than durable; empty when every commit is."""
        return [f"{n}={v}" for n, v in self.values if (n, v.lower()) in _CAVEATS]

    def writes_note(self) -> str:
        """The short note beside a read-write tps: 'synchronous_commit=off' (or
        '' when commits are durable)."""
        return ", ".join(self.unsafe())


def meaning_of(study: Study, target: str) -> Meaning | None:
    """The settings that change what the target's numbers mean, as its server
    reported them (None when the server's settings were not captured)."""
    declared = [t for t in study.params.get("targets") or [] if isinstance(t, dict)]
    env = study.target_environments.get(target)
    if env is None and len(declared) <= 1:  # one target: the study's own environment
        env = study.environment
    if env is None or env.postgres is None:
        return None
    spec = next((t for t in declared if t.get("name") == target), None)
    if spec is None and len(declared) == 1:
        spec = declared[0]
    profile = study.params.get("profile")
    if spec is not None:
        profile = None if spec.get("dsn") else spec.get("profile", profile)
    return Meaning.of(env.postgres.settings, str(profile) if profile else None)


def unsafe_of(study: Study, target: str) -> str:
    """'synchronous_commit=off' for a target whose server does not make its commits
    durable ('' when it does, or its settings were not captured)."""
    found = meaning_of(study, target)
    return found.writes_note() if found is not None else ""
