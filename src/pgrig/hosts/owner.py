"""Who made a directory on a host, so that ``pgrig hosts clean`` removes only
what a dead pgrig left and never what a live one owns.

Every directory pgrig makes on a host (a server's, a load run's) holds
``.pgrig-owner.json``: the controlling machine's name, the pgrig process's
PID and start time there, and the PIDs pgrig started on the host. A record
written by another controlling machine is never judged from here.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial

from pgrig import proc
from pgrig.errors import PgrigError
from pgrig.hosts.executor import SH, TMP, Executor
from pgrig.ownership import (
    OWNER_FILE,
    current_study,
    owner_alive,
    process_start_time,
    removable,
)

# In a directory pgrig made elsewhere for one of its own (``made_beside``): the
# path of the directory it was made for. Removed with that one only while it
# holds this file (the name older pgrig versions gave it too). Also the name of
# a local work directory's record before the owner record (``_legacy``).
MARKER = ".pgrig-workdir"
PREFIXES = ("pgrig-server-", "pgrig-load-")
# A directory a clean has claimed (renamed, in its own parent) before removing
# it: two cleans that meet one directory (two operators, two CI jobs on one
# host) never both judge it, and a clean cut short between the rename and the
# removal leaves a name the next clean still finds.
CLAIMED = "pgrig-removing-"
# On the controlling machine: the load hosts' logs copied here for a target
# without a directory of its own (``targets.remote``).
HOSTLOGS = "pgrig-hostlogs-"


@dataclass(frozen=True)
class Owner:
    controller: str  # hostname of the machine pgrig ran on
    pid: int
    start: int | None  # /proc/<pid>/stat start time there: a PID's identity over time
    created: float
    kind: str  # "server", "load", "hostlogs" (this machine's copies of load logs), "holder"
    pids: tuple[int, ...] = field(default=())  # processes pgrig started for it
    study: str = ""  # the study it ran for ("": an older pgrig, or none)
    # Left running on purpose (--keep): the next run of its study leaves it;
    # only `pgrig clean --inventory` (any study) removes it.
    kept: bool = False
    # Directories made for it outside it (``made_beside``), removed with it.
    elsewhere: tuple[str, ...] = field(default=())

    @classmethod
    def mine(cls, kind: str, study: str | None = None) -> Owner:
        pid = os.getpid()
        return cls(
            socket.gethostname(),
            pid,
            process_start_time(pid),
            time.time(),
            kind,
            study=current_study() if study is None else study,
        )

    def alive(self) -> bool:
        """True unless this machine can tell its owner is gone (another
        controller's record is never ours to judge)."""
        return owner_alive(self.pid, self.controller, self.start)


def write(ex: Executor, directory: str, owner: Owner) -> None:
    # Rewritten as each process starts: written beside and renamed over, so a
    # pgrig killed mid-write (or `clean` reading meanwhile) never leaves or sees
    # an empty record, which would hide the PIDs that `clean` must stop.
    ex.replace_file(f"{directory}/{OWNER_FILE}", json.dumps(asdict(owner)).encode())


def _added(
    ex: Executor,
    directory: str,
    owner: Owner | None,
    pids: tuple[int, ...] = (),
    elsewhere: tuple[str, ...] = (),
) -> Owner:
    """The record with ``pids`` and ``elsewhere`` added, written. ``owner``: the
    record as its one holder in this process last wrote it (a host's work
    directory, a load's), added to without reading it back; None: what the
    file says (a local work directory's, made by ``pgrig.cluster.workdir``)."""
    current = owner or read(ex, directory)
    if current is None:
        raise PgrigError(f"{ex.of(directory)} has no owner record to add to")
    updated = replace(
        current,
        pids=tuple(dict.fromkeys((*current.pids, *pids))),
        elsewhere=tuple(dict.fromkeys((*current.elsewhere, *elsewhere))),
    )
    write(ex, directory, updated)
    return updated


def with_pid(ex: Executor, directory: str, owner: Owner | None, pid: int) -> Owner:
    """The record again, with one more process started for it."""
    return _added(ex, directory, owner, pids=(pid,))


def made_beside(ex: Executor, directory: str, owner: Owner | None, path: str) -> Owner:
    """``path``, a directory just made outside ``directory`` for it (a WAL
    directory, a tablespace's, a socket directory), marked and named in its
    record: `pgrig clean` removes it with ``directory`` after a kill -9."""
    ex.write_bytes(f"{path}/{MARKER}", directory.encode())
    return _added(ex, directory, owner, elsewhere=(path,))


def remove_beside(ex: Executor, path: str) -> None:
    """Remove ``path``, made beside a directory (``made_beside``), only while it
    carries the marker: what stands there without it is not pgrig's."""
    if ex.exists(f"{path}/{MARKER}"):
        ex.remove_tree(path)


@dataclass
class Workdir:
    """A directory pgrig made on a host (``make``), and its owner record as this
    object last wrote it. Every addition in this process goes through it (a
    remote target's probes and its server share one; a load host's pgbench
    run), so each is written over that record, never read back from the host
    first."""

    ex: Executor
    path: str
    record: Owner

    def started(self, pid: int) -> None:
        """A process started for it (a probe, each start's postmaster, a load
        host's pgbench): `pgrig clean` stops it after a kill -9 of pgrig."""
        self.record = with_pid(self.ex, self.path, self.record, pid)

    def made_beside(self, path: str) -> None:
        """``path``, a directory just made outside it for it (a WAL directory, a
        tablespace's): `pgrig clean` removes it with this one after a kill -9."""
        self.record = made_beside(self.ex, self.path, self.record, path)

    def keep(self) -> None:
        """Left running on purpose (--keep): only `pgrig clean --inventory` removes it."""
        self.record = replace(self.record, kept=True)
        write(self.ex, self.path, self.record)


# mktemp's directory and its record in it, or nothing: a record that cannot be
# written takes its directory with it (one without a record is left by every
# clean, forever). Its first record needs no rename (``write``'s): until it is
# there, the directory is no one's, and a clean leaves it.
_MAKE = (
    'd=$(mktemp -d --tmpdir="$1" "$2XXXXXX") || exit; '
    'if base64 -d > "$d/$3" && chmod 644 "$d/$3"; then printf "%s\\n" "$d"; '
    'else rm -rf -- "$d"; exit 1; fi'
)


def make(ex: Executor, kind: str) -> Workdir:
    """``/tmp/pgrig-<kind>-*`` on the host with this process's owner record of
    ``kind`` in it, in one command (not a mktemp, then a write)."""
    record = Owner.mine(kind)
    data64 = base64.b64encode(json.dumps(asdict(record)).encode()).decode() + "\n"
    argv = [SH, "-c", _MAKE, "sh", TMP, f"pgrig-{kind}-", OWNER_FILE]
    made = ex.run(argv, timeout=30, what="mktemp", input=data64)
    return Workdir(ex, made.stdout.strip(), record)


def read(ex: Executor, directory: str) -> Owner | None:
    return _seen(ex, directory).owner


def _file(ex: Executor, path: str) -> str | None:
    try:
        return ex.read_text(path)
    except PgrigError:
        return None


@dataclass(frozen=True)
class Seen:
    """A directory's records as read: its owner record (or an older pgrig's
    marker standing for one, ``_legacy``) and its marker's text."""

    directory: str
    owner: Owner | None
    marker: str | None = None  # None: it has none

    @classmethod
    def of(cls, directory: str, record: str | None, marker: str | None) -> Seen:
        return cls(directory, _parsed(record) if record is not None else _legacy(marker), marker)

    @property
    def made_for(self) -> str:
        """The directory it was made beside (``made_beside``); "": none."""
        return (self.marker or "").strip() if self.owner is None else ""


def _seen(ex: Executor, directory: str) -> Seen:
    """One directory's records, a file each (``records``: a host's all at once)."""
    record = _file(ex, f"{directory}/{OWNER_FILE}")
    seen = Seen.of(directory, record, None)
    if seen.owner is not None:
        return seen
    return Seen.of(directory, record, _file(ex, f"{directory}/{MARKER}"))


def _parsed(text: str) -> Owner | None:
    try:
        data = json.loads(text)
        known = {f.name for f in fields(Owner)}  # a newer pgrig's fields are not refused
        owner = Owner(**{k: v for k, v in data.items() if k in known})
        return replace(owner, pids=tuple(owner.pids), elsewhere=tuple(owner.elsewhere))
    except (ValueError, TypeError, AttributeError):
        return None


def _legacy(marker: str | None) -> Owner | None:
    """A local work directory made by a pgrig older than this record: its
    marker (JSON: owner_pid, owner_start, host, created_at, study, socket_dir,
    extra_dirs) read as the record it stood for, so that an upgrade does not
    strand what an older pgrig left. Its server's PID was never recorded: the
    data directory's postmaster.pid names it (``_postmaster``). A directory
    made beside one (its marker a plain path) is no record."""
    if marker is None:
        return None
    try:
        data = json.loads(marker)
        made = (data.get("socket_dir"), *data.get("extra_dirs", ()))
        return Owner(
            controller=str(data["host"]),
            pid=int(data["owner_pid"]),
            start=data.get("owner_start"),
            created=float(data["created_at"]),
            kind="server",
            study=str(data.get("study") or ""),
            elsewhere=tuple(str(d) for d in made if d),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


# Every directory in $1 whose name starts with one of $4...: its name in base64,
# its owner record ($2) and its marker ($3) each as "+" and the file in base64
# ("-": no such file), a line each. One
# command however many there are: a clean's cost does not grow with what other
# runs left in /tmp. A directory gone by the end of its line (another clean
# removed it meanwhile) is not listed.
_RECORDS = r"""
cd -- "$1" || exit
record=$2 marker=$3
shift 3
each() { if [ -f "$1" ] && b=$(base64 -w0 < "$1"); then printf ' +%s' "$b"; else printf ' -'; fi; }
for prefix; do
    for d in "$prefix"*; do
        [ -e "$d" ] || [ -L "$d" ] || continue
        line=$(printf %s "$d" | base64 -w0; each "$d/$record"; each "$d/$marker")
        if [ -e "$d" ] || [ -L "$d" ]; then printf '%s\n' "$line"; fi
    done
done
"""


def records(ex: Executor, prefixes: tuple[str, ...] = PREFIXES) -> list[Seen]:
    """The directories in ``/tmp`` on the host that a pgrig may have made (their
    names start with one of ``prefixes``, or a claimed one's: ``CLAIMED``), with
    their records, read in one command."""
    names = (*prefixes, *(CLAIMED + p for p in prefixes))
    argv = [SH, "-c", _RECORDS, "sh", TMP, OWNER_FILE, MARKER, *names]
    listing = ex.run(argv, timeout=60, what=f"reading the owner records in {TMP}")

    def text(b64: str) -> str:
        return base64.b64decode(b64).decode(errors="replace")

    found = {}
    for line in listing.stdout.splitlines():
        name, record, marker = line.split(" ")
        directory = f"{TMP}/{text(name)}"
        held, marked = (None if f == "-" else text(f[1:]) for f in (record, marker))
        found[directory] = Seen.of(directory, held, marked)
    return [found[directory] for directory in sorted(found)]


@dataclass(frozen=True)
class Leftover:
    host: str
    directory: str
    owner: Owner | None
    action: str  # "removed", "would remove", "left: ..."
    # Why, for a caller to act on: "removed", "would remove", "no record",
    # "beside" (made for another: ``made_beside``), "alive", "kept", "other
    # study", "cannot" (its removal failed: ``action`` says why)
    verdict: str = ""


def _stop(ex: Executor, pid: int, directory: str) -> None:
    """Stop a process pgrig started in ``directory``, after checking that the PID
    still is that process (its command line names the directory)."""
    try:
        cmdline = ex.read_bytes(f"/proc/{pid}/cmdline").decode(errors="replace")
    except PgrigError:
        return  # gone
    if f"{directory}/" not in cmdline:
        # The PID was reused by something else (a path inside it: a server
        # ``-D .../pgrig-x-a/data`` is not ``pgrig-x-ab``'s).
        return

    def send(signum: signal.Signals) -> None:
        ex.run(["kill", f"-{signum.value}", str(pid)], timeout=30, check=False, what="kill")
        # A stopped process (^Z, a debugger, a frozen cgroup) holds the signal
        # pending until it runs again: continue it, as systemd does after its
        # KillSignal, so that it can act on the signal and go.
        ex.run(["kill", f"-{signal.SIGCONT.value}", str(pid)], timeout=30, check=False, what="kill")

    def gone(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while ex.exists(f"/proc/{pid}"):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    proc.escalate_by(send, gone, ((signal.SIGINT, 30.0), (signal.SIGKILL, 10.0)))


def _postmaster(ex: Executor, directory: str) -> int | None:
    """The PID in the server's postmaster.pid: one started but not yet recorded
    (pgrig killed inside ``pg_ctl start``), or an older pgrig's, which recorded
    none. ``_stop`` checks it is that server before it signals it."""
    try:
        first = ex.read_text(f"{directory}/data/postmaster.pid").split("\n", 1)[0].strip()
    except PgrigError:
        return None
    return int(first) if first.isdigit() else None


def claimed(directory: str) -> str:
    """The name a clean gives ``directory`` before it removes it (``CLAIMED``)."""
    parent, _, name = directory.rpartition("/")
    return f"{parent}/{CLAIMED}{name}"


def clean_one(
    ex: Executor, directory: str, *, study: str | None = None, dry_run: bool = False
) -> Leftover | None:
    """Judge one directory a pgrig may have made, found as it was made or as a
    clean cut short claimed it, and remove it when its pgrig is dead (``_judge``).
    None: another clean claimed it first, or it is gone."""
    seen = _seen(ex, directory)
    if seen.owner is None and not ex.exists(directory):
        return None  # claimed and removed meanwhile by another clean
    return _judge(ex, seen, study=study, dry_run=dry_run)


def _judge(
    ex: Executor, seen: Seen, *, study: str | None = None, dry_run: bool = False
) -> Leftover | None:
    """Remove the directory ``seen`` when its pgrig is dead: stop the processes
    it recorded, claim it, remove what was made beside it, then it. ``study``:
    only what runs of that study left (``pgrig.ownership.removable``); None:
    every study's. None: another clean claimed it first."""
    directory, owner = seen.directory, seen.owner
    parent, _, name = directory.rpartition("/")
    made = f"{parent}/{name.removeprefix(CLAIMED)}"
    left = partial(Leftover, ex.name, directory, owner)  # (action, verdict)
    if owner is None:
        if made_for := seen.made_for:  # a wal_directory of /tmp: listed too
            return left(f"left: made for {made_for}, goes with it", "beside")
        return left("left: no owner record (not made by this pgrig, or cut short)", "no record")
    if owner.alive():
        return left(f"left: its pgrig is alive ({owner.controller}, pid {owner.pid})", "alive")
    if owner.kept and study is not None:
        return left("left: kept with --keep (`pgrig clean --inventory` removes it)", "kept")
    if not removable(owner.study, study):
        return left(f"left: another study's ({owner.study or 'an older pgrig'})", "other study")
    if dry_run:
        return left("would remove", "would remove")
    if directory == claimed(made) and not ex.exists(directory):
        return None  # the clean that claimed it, at work since it was read, removed it
    # The processes' command lines name the directory as it was made.
    for pid in dict.fromkeys((*owner.pids, _postmaster(ex, directory))):
        if pid is not None:
            _stop(ex, pid, made)
    if directory != claimed(made):
        argv = ["mv", "--no-target-directory", "--", directory, claimed(made)]
        done = ex.run(argv, timeout=30, check=False, what="mv")
        if not done.ok:
            if not ex.exists(directory):
                return None  # another clean claimed it first and removes it
            # a read-only filesystem: said, left for a clean once it is writable
            why = done.stderr.strip().rsplit(": ", 1)[-1] or f"mv exited {done.returncode}"
            return left(f"left: cannot remove it: {why}", "cannot")
    try:
        for other in owner.elsewhere:
            remove_beside(ex, other)
        ex.remove_tree(claimed(made))
    except PgrigError as exc:
        return left(f"left: cannot remove it: {exc}", "cannot")
    return left("removed", "removed")


def clean(
    ex: Executor,
    dry_run: bool = False,
    study: str | None = None,
    prefixes: tuple[str, ...] = PREFIXES,
) -> list[Leftover]:
    """What dead pgrig processes left in ``/tmp`` on the host (``_judge`` each,
    their records read at once: ``records``). ``prefixes``: the directories'
    names looked at."""
    out = []
    for seen in records(ex, prefixes):
        if seen.owner is None and seen.directory.startswith(f"{TMP}/{CLAIMED}"):
            # Claimed, its record gone: most likely another clean at work on it
            # since the records were read. Read again, as it is now.
            left = clean_one(ex, seen.directory, study=study, dry_run=dry_run)
        else:
            left = _judge(ex, seen, study=study, dry_run=dry_run)
        if left is not None:
            out.append(left)
    return out
