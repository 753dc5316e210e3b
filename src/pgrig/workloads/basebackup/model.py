"""What a base backup step records: the data it copied and the copy's figures."""

from __future__ import annotations

from dataclasses import dataclass, field

# Decimal megabytes, as seed 002 ("74GB ... 795.7MB/s") and pg_basebackup's -r.
MB = 1_000_000


@dataclass(frozen=True)
class BasebackupData:
    """The TPC-B data a backup copies: loaded by this workload, or found loaded."""

    scale: int
    loaded: bool  # False: the tables of that scale were there already (reused)
    load_s: float | None  # pgbench -i's "done in" when loaded here
    database_bytes: int  # pg_database_size of the TPC-B database
    cluster_bytes: int  # every database of the cluster: what a base backup reads


@dataclass(frozen=True)
class Phases:
    """Seconds between pg_basebackup's --verbose milestones, as seen live."""

    checkpoint_s: float | None = None  # start -> "checkpoint completed"
    transfer_s: float | None = None  # checkpoint done -> "write-ahead log end point"
    finish_s: float | None = None  # end point -> "base backup completed" (WAL, fsync)
    sync_s: float | None = None  # "syncing data to disk" -> completed


@dataclass(frozen=True)
class BasebackupResult:
    """One pg_basebackup run: seed 002's "74GB ... 795.7MB/s", and what it is made of."""

    data_bytes: int  # what pg_basebackup reported receiving (--progress total), WAL excluded
    copy_bytes: int  # the copy on disk: every file's size, WAL and manifest included
    files: int  # files in the copy
    wall_s: float  # the command, start to exit
    format: str  # plain | tar
    checkpoint: str  # fast | spread
    wal_method: str  # stream | fetch | none
    compress: str  # none, gzip, server-zstd:3, ...
    max_rate: str | None  # pg_basebackup -r, as given
    destination: str  # "same target", "target NAME" or "directory PATH"
    filesystem: str  # where the copy went, as df names it (device and mount point)
    tool_version: str  # pg_basebackup --version
    start_lsn: str | None = None
    end_lsn: str | None = None
    timeline: int | None = None
    tablespaces: int = 1
    phases: Phases = field(default_factory=Phases)
    argv: tuple[str, ...] = ()

    @property
    def mb_per_s(self) -> float:
        """The seed's figure: the data copied per second of the whole command."""
        return self.data_bytes / MB / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def write_mb_per_s(self) -> float:
        """The copy's own bytes per second (less than ``mb_per_s`` when compressed)."""
        return self.copy_bytes / MB / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def transfer_mb_per_s(self) -> float | None:
        """Data per second of the transfer alone: no checkpoint wait, no final fsync."""
        t = self.phases.transfer_s
        return self.data_bytes / MB / t if t else None
