"""What the durability check records: frozen dataclasses, JSON round trip via
``pgrig.results.to_dict`` / ``from_dict`` (kind "durability")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Crash methods, as ``--crash`` names them.
IMMEDIATE = "immediate"  # pg_ctl stop -m immediate
KILL_POSTMASTER = "kill-postmaster"  # SIGKILL of the postmaster
KILL_BACKEND = "kill-backend"  # SIGKILL of one client backend: crash recovery of all
METHODS = (IMMEDIATE, KILL_POSTMASTER, KILL_BACKEND)
METHOD_TEXT = {
    IMMEDIATE: "pg_ctl stop -m immediate",
    KILL_POSTMASTER: "SIGKILL of the postmaster",
    KILL_BACKEND: "SIGKILL of a client backend",
}


# What decides whether an acknowledged commit survives a crash.
SETTINGS = (
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "wal_writer_delay",
    "wal_writer_flush_after",
    "wal_buffers",
    "wal_sync_method",
    "commit_delay",
    "data_checksums",
    "restart_after_crash",
    "data_sync_retry",
    "recovery_init_sync_method",
)

# Crash models: what is lost. A process crash (every method above) loses the
# server's memory but not the kernel's page cache, so whatever PostgreSQL wrote
# and did not fsync survives it; a power loss (docs/durability.md) loses that too.
PROCESS = "process"
POWER_LOSS = "power-loss"
# What a power loss keeps of the unsynced state (pgrig.lossyfs.MODES): nothing,
# a random half of the unsynced pages, or a torn prefix of one of them.
POWER_LOSS_MODES = ("drop", "random-subset", "torn")

# Settings whose effect shows only when the kernel's unsynced writes are lost,
# with the value that makes them matter: a process crash cannot test them.
_PROCESS_BLIND = {
    "fsync": ("off", "nothing is fsynced, and a process crash keeps the page cache"),
    "full_page_writes": ("off", "a torn 8kB page needs a power loss mid-write"),
    "data_sync_retry": ("on", "a failed fsync retried only matters when the cache is lost"),
}
LINUX_DEFAULT_SYNC = "fdatasync"


def untested_by(
    model: str,
    settings: dict[str, str],
    mode: str | None = None,
    cuts: Sequence[Cut] = (),
) -> tuple[str, ...]:
    """The settings of this run that its crash model (and power-loss mode) cannot
    test, each with why; ``cuts``: what each power loss did (a torn run whose tears
    hit no data page, or left it as it was, tested no torn-page protection)."""
    if model != PROCESS:
        if mode == "drop" and settings.get("full_page_writes") == "off":
            # Whole pages are dropped or kept: none is half-written.
            return (
                "full_page_writes = off: a `drop` power loss tears no page; use "
                "--power-loss-mode torn (or random-subset)",
            )
        if mode == "torn" and cuts and not any(c.tore_data for c in cuts):
            where = "; ".join(c.torn or "no unsynced page" for c in cuts[:3])
            return (
                f"full_page_writes = {settings.get('full_page_writes', '?')}: none of the "
                f"{len(cuts)} torn page{'s' if len(cuts) != 1 else ''} was a data page the "
                f"tear changed ({where}), so recovery never met a torn page; a smaller "
                "shared_buffers makes the server write data pages between checkpoints",
            )
        return ()
    out = [
        f"{name} = {value}: {why}"
        for name, (value, why) in _PROCESS_BLIND.items()
        if settings.get(name) == value
    ]
    method = settings.get("wal_sync_method")
    if method and method != LINUX_DEFAULT_SYNC:
        out.append(
            f"wal_sync_method = {method}: which sync call makes WAL durable matters only "
            "when the page cache is lost"
        )
    return tuple(out)


@dataclass(frozen=True)
class Check:
    """One verification: ok True/False, or None when it could not run (detail says why)."""

    name: str
    ok: bool | None
    detail: str


@dataclass(frozen=True)
class Loss:
    """Acknowledged commits found missing at the verification after one crash."""

    count: int
    # From the earliest lost acknowledgement to the last acknowledgement before
    # the crash, in ms. Commits answered after the crash signal was sent (by
    # backends that had not noticed yet) are counted in ``after_signal`` too.
    window_ms: float
    after_signal: int = 0
    # Every commit acknowledged in the same window, lost or not.
    acknowledged_in_window: int = 0
    example_ids: tuple[int, ...] = ()

    def sentence(self, crash: int | None) -> str:
        where = f"crash {crash}" if crash is not None else "the end of the run"
        text = (
            f"{self.count:,} commit{'s' if self.count != 1 else ''} acknowledged in the last "
            f"{self.window_ms:,.0f} ms before {where} "
            f"{'were' if self.count != 1 else 'was'} lost"
        )
        extra = []
        if self.after_signal:
            extra.append(f"{self.after_signal:,} of them answered after the crash signal was sent")
        if self.example_ids:
            extra.append(f"first: id {self.example_ids[0]}")
        survived = self.acknowledged_in_window - self.count
        if survived > 0:
            extra.append(f"{survived:,} others acknowledged in that window survived")
        return text + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Cut:
    """What one power loss threw away (``pgrig.lossyfs.PowerLossReport``, summed up)."""

    mode: str
    unsynced_pages: int  # cached pages not fsynced when the power went
    persisted_pages: int  # of those, written anyway (random-subset, torn)
    lost_files: int  # files with unsynced data and no durable name
    torn: str | None = None  # "path at offset: N bytes" of the torn page
    seed: int = 0  # of the choice of pages a partial power loss keeps (from the run's seed)
    # The torn page: a relation's data page (what full_page_writes protects, and what
    # WAL replay reads) or another file (WAL, commit log...), how many of its bytes
    # the tear changed, and whether it differed after recovery from how the tear
    # left it (rewritten by WAL replay or the end-of-recovery checkpoint) - None
    # when not looked at.
    torn_data_page: bool = False
    torn_changed: int = 0
    torn_rewritten: bool | None = None

    @property
    def tore_data(self) -> bool:
        """The tear changed a data page: recovery had something to repair."""
        return self.torn_data_page and self.torn_changed > 0

    def torn_fate(self) -> str:
        """What became of the torn page, in words."""
        if not self.torn:
            return ""
        if not self.tore_data:
            kind = "a data page" if self.torn_data_page else "not a data page"
            return f"{kind}, {self.torn_changed:,} bytes changed: nothing for recovery to repair"
        if self.torn_rewritten:
            return f"data page, {self.torn_changed:,} bytes torn, rewritten by recovery"
        if self.torn_rewritten is False:
            return (
                f"data page, {self.torn_changed:,} bytes torn, left as torn by recovery "
                "(never read; the checksum check reads it)"
            )
        return f"data page, {self.torn_changed:,} bytes torn"

    def sentence(self) -> str:
        text = f"{self.unsynced_pages:,} unsynced pages dropped"
        if self.persisted_pages:
            text = (
                f"{self.unsynced_pages - self.persisted_pages:,} of {self.unsynced_pages:,} "
                "unsynced pages dropped"
            )
        if self.lost_files:
            text += f", {self.lost_files:,} unsynced files gone"
        if self.torn:
            text += f", torn page {self.torn} ({self.torn_fate()})"
        return text


@dataclass(frozen=True)
class Crash:
    number: int  # 1-based
    method: str
    at: str  # ISO 8601 UTC, when the crash signal was sent
    load_s: float  # seconds of load since the previous recovery (or the start)
    acknowledged: int  # commits acknowledged in that load period
    in_doubt: int  # commits sent but not answered because of this crash
    # Crash signal -> accepting connections again.
    downtime_s: float
    # Restart (pg_ctl start, or the postmaster's own crash restart) -> accepting connections.
    recovery_s: float
    killed_pid: int | None = None
    loss: Loss | None = None
    checks: tuple[Check, ...] = ()
    power_loss: Cut | None = None  # set when the crash was followed by a power loss


@dataclass(frozen=True)
class DurabilityResult:
    method: str
    clients: int
    crashes_planned: int
    interval_s: float
    seed: int
    server_version: str
    # The settings that decide durability, as the server reported them.
    settings: dict[str, str] = field(default_factory=dict)
    crashes: tuple[Crash, ...] = ()
    load_s: float = 0.0  # total seconds under load
    acknowledged: int = 0
    in_doubt: int = 0
    in_doubt_committed: int = 0  # in-doubt commits found in the table afterwards
    rejected: int = 0  # transactions the server answered with an error (rolled back)
    rejected_examples: tuple[str, ...] = ()
    lost: int = 0
    final_loss: Loss | None = None  # lost acknowledged commits found only at the end
    checks: tuple[Check, ...] = ()  # the final verification
    failures: tuple[str, ...] = ()  # one sentence per failed check, empty when it passed
    # Set when the server did not come back: where its data and log were kept.
    kept_datadir: str | None = None
    kept_log: str | None = None
    crash_model: str = PROCESS
    power_loss_mode: str | None = None  # POWER_LOSS_MODES, with crash_model POWER_LOSS
    # Settings of this run its crash model cannot test (``untested_by``): a PASS
    # says nothing about them.
    untested: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def lost_window_ms(self) -> float:
        """The longest span of acknowledged-but-lost commits over all crashes."""
        losses = [c.loss for c in self.crashes if c.loss] + [self.final_loss]
        return max((x.window_ms for x in losses if x is not None), default=0.0)

    @property
    def tps(self) -> float:
        return self.acknowledged / self.load_s if self.load_s > 0 else 0.0
