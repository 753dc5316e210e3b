"""A bulk load at ``wal_level = minimal``, on a cluster pgrig created.

At ``wal_level = minimal`` a COPY into a table created or truncated in the same
transaction, and a CREATE INDEX, write no WAL: the relation is written and
fsynced at commit instead (``wal_skip_threshold``, 13 and later; before 13 the
same for COPY and index builds). What a DBA does for a big load, pgrig does for
the throwaway server it owns: restart it with the minimal settings on the
postmaster's command line (nothing written to its files) for the load, and
restart it with the profile's settings before anything is measured. A crash
meanwhile comes back with the profile's settings too.

Never on a server pgrig did not create (it is never restarted), and never where
every write must go through the WAL as configured (the lossy filesystem of a
power-loss study).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Protocol

from pgrig.errors import ClusterError
from pgrig.pgsource.binaries import PgBinaries

LOAD_WAL = ("auto", "minimal", "profile")  # the workloads' load_wal key
MINIMAL = "minimal"
# "auto": minimal from this much data. The two restarts cost about 1.3 s here
# (shutdown checkpoint, start, pg_isready); the WAL they spare is worth that from
# about 250 MB: TPC-B scale 10 (160 MB) loaded 0.4 s slower at minimal, scale 30
# (480 MB) 1.9 s faster (bench/tpcb_load.py, 2 rounds, load average 8, 2026-11-25).
AUTO_FROM_BYTES = 300_000_000
# wal_level = minimal refuses to start with WAL senders or archiving on.
SETTINGS = {"wal_level": MINIMAL, "max_wal_senders": "0", "archive_mode": "off"}
SUMMARIZE_WAL_FROM = 170000  # summarize_wal (17) needs wal_level replica
RESTART_MINIMAL = "restart at wal_level=minimal"
RESTART_PROFILE = "restart at the profile's settings"


class Restartable(Protocol):
    """A server pgrig made that a load may restart with other settings, on any
    host: ``pgrig.cluster.server.Cluster`` here, ``pgrig.cluster.hosted.HostedServer``
    on another host."""

    @property
    def settings(self) -> Mapping[str, str]: ...  # the profile's

    @property
    def bins(self) -> PgBinaries: ...

    @property
    def logfile(self) -> Path | str: ...  # on the server's host

    def restart(self, settings: Mapping[str, str] | None = None, timeout: float = 120) -> None: ...


def settings(version_num: int) -> dict[str, str]:
    """The postmaster options of a minimal-WAL load for this major."""
    extra = {"summarize_wal": "off"} if version_num >= SUMMARIZE_WAL_FROM else {}
    return {**SETTINGS, **extra}


def wanted(load_wal: str, data_bytes: int) -> bool:
    """Whether a load of about ``data_bytes`` should run at minimal WAL, as the
    workload's ``load_wal`` says (the server permitting)."""
    return load_wal == MINIMAL or (load_wal == "auto" and data_bytes >= AUTO_FROM_BYTES)


def already_minimal(cluster: Restartable) -> bool:
    """The profile itself runs at minimal: nothing to restart for."""
    return cluster.settings.get("wal_level", "").strip("'") == MINIMAL


@contextlib.contextmanager
def minimal_wal(cluster: Restartable, steps: MutableMapping[str, float]) -> Iterator[None]:
    """Run the body on ``cluster`` restarted at ``wal_level = minimal``, then
    restart it with the profile's settings - also when the body fails. Each
    restart's seconds go into ``steps``: they are part of the load's time."""
    if already_minimal(cluster):
        yield
        return
    t0 = time.monotonic()
    cluster.restart(settings(cluster.bins.version_num))
    steps[RESTART_MINIMAL] = round(time.monotonic() - t0, 2)
    try:
        yield
    finally:
        t1 = time.monotonic()
        try:
            cluster.restart()
        except ClusterError as exc:
            raise ClusterError(
                f"after the load at wal_level=minimal the server did not start again with "
                f"the profile's settings: {exc}",
                hint=f"see {cluster.logfile}",
            ) from exc
        steps[RESTART_PROFILE] = round(time.monotonic() - t1, 2)
