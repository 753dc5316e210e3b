"""Who made a directory on a host, so that ``pgrig hosts clean`` removes only
what a dead pgrig left and never what a live one owns.

Every directory pgrig makes on a host (a server's, a load run's) holds
``.pgrig-owner.json``: the controlling machine's name, the pgrig process's
PID and start time there, and the PIDs pgrig started on the host. A record
written by another controlling machine is never judged from here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass, field, replace

from pgrig import proc
from pgrig.errors import PgrigError
from pgrig.hosts.executor import TMP, Executor
from pgrig.ownership import current_study, owner_alive, process_start_time, removable

OWNER_FILE = ".pgrig-owner.json"
PREFIXES = ("pgrig-server-", "pgrig-load-")
# A directory a clean has claimed (renamed) before removing it: two cleans that
# meet one directory (two operators, two CI jobs on one host) never both judge
# it, and a clean cut short between the rename and the removal leaves a name the
# next clean still finds.
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
    kind: str  # "server", "load", or "hostlogs" (this machine's copies of load logs)
    pids: tuple[int, ...] = field(default=())  # processes pgrig started on the host
    study: str = ""  # the study it ran for ("": an older pgrig, or none)
    # Left running on purpose (--keep): the next run of its study leaves it;
    # only `pgrig clean --inventory` (any study) removes it.
    kept: bool = False

    @classmethod
    def mine(cls, kind: str) -> Owner:
        pid = os.getpid()
        return cls(
            socket.gethostname(),
            pid,
            process_start_time(pid),
            time.time(),
            kind,
            study=current_study(),
        )

    def alive(self) -> bool:
        """True unless this machine can tell its owner is gone (another
        controller's record is never ours to judge)."""
        return owner_alive(self.pid, self.controller, self.start)


def write(ex: Executor, directory: str, owner: Owner) -> None:
    # Rewritten as each process starts: written beside and renamed over, so a
    # pgrig killed mid-write (or `clean` reading meanwhile) never leaves or sees
    # an empty record, which would hide the PIDs that `clean` must stop.
    final = f"{directory}/{OWNER_FILE}"
    ex.write_bytes(f"{final}.new", json.dumps(asdict(owner)).encode())
    ex.run(["mv", "-f", "--", f"{final}.new", final], timeout=30, what="mv")


def with_pid(ex: Executor, directory: str, owner: Owner, pid: int) -> Owner:
    """The record again, with one more process started on the host."""
    updated = replace(owner, pids=(*owner.pids, pid))
    write(ex, directory, updated)
    return updated


def read(ex: Executor, directory: str) -> Owner | None:
    try:
        data = json.loads(ex.read_text(f"{directory}/{OWNER_FILE}"))
        data["pids"] = tuple(data.get("pids", ()))
        return Owner(**data)
    except (PgrigError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Leftover:
    host: str
    directory: str
    owner: Owner | None
    action: str  # "removed", "would remove", "left: ..."


def _stop(ex: Executor, pid: int, directory: str) -> None:
    """Stop a process pgrig started in ``directory``, after checking that the PID
    still is that process (its command line names the directory)."""
    try:
        cmdline = ex.read_bytes(f"/proc/{pid}/cmdline").decode(errors="replace")
    except PgrigError:
        return  # gone
    if directory not in cmdline:
        return  # the PID was reused by something else

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


def _claim(ex: Executor, directory: str, made: str) -> bool:
    """Rename the directory to its claimed name, which only one clean can do
    (rename is atomic); a directory claimed earlier by a clean cut short is
    this clean's to finish."""
    claimed = f"{TMP}/{CLAIMED}{made}"
    if directory == claimed:
        return True
    argv = ["mv", "--no-target-directory", "--", directory, claimed]
    return ex.run(argv, timeout=30, check=False, what="mv").ok


def clean(
    ex: Executor,
    dry_run: bool = False,
    study: str | None = None,
    prefixes: tuple[str, ...] = PREFIXES,
) -> list[Leftover]:
    """What dead pgrig processes left in ``/tmp`` on the host: stop, remove, report.
    ``study``: only what runs of that study left (``pgrig.ownership.removable``);
    None: every study's. ``prefixes``: the directories' names looked at."""
    out = []
    for name in ex.listdir(TMP):
        made = name.removeprefix(CLAIMED)
        if not made.startswith(prefixes):
            continue
        directory = f"{TMP}/{name}"
        owner = read(ex, directory)
        if owner is None and not ex.exists(directory):
            continue  # claimed and removed meanwhile by another clean
        if owner is None:
            action = "left: no owner record (not made by this pgrig, or cut short)"
        elif owner.alive():
            action = f"left: its pgrig is alive ({owner.controller}, pid {owner.pid})"
        elif owner.kept and study is not None:
            action = "left: kept with --keep (`pgrig clean --inventory` removes it)"
        elif not removable(owner.study, study):
            action = f"left: another study's ({owner.study or 'an older pgrig'})"
        elif dry_run:
            action = "would remove"
        else:
            # The processes' command lines name the directory as it was made.
            for pid in owner.pids:
                _stop(ex, pid, f"{TMP}/{made}")
            if not _claim(ex, directory, made):
                continue  # another clean claimed it first and removes it
            ex.remove_tree(f"{TMP}/{CLAIMED}{made}")
            action = "removed"
        out.append(Leftover(ex.name, directory, owner, action))
    return out
