"""Who owns what pgrig leaves on disk between runs: work directories, lossy
mounts, the storage lab's filesystems and cgroups.

Every such record names its owner: the pgrig process (host, PID and the PID's
start time) and the study it ran. A record whose owner is gone is an orphan;
``pgrig clean`` removes every orphan, a run only its own study's (a resumed
or repeated run of the same campaign). Orphans of other studies are reported
and left to their owner or ``pgrig clean``: another study on the same state
directory may be merely paused, or on another host. A study is known by its campaign's name.

The records live in pgrig's state directory (``state_dir``). The files a probe
makes in a target (``create_exclusively``) are registered here too: every tool
on any host can make one without reaching up into the cluster's work directories.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from pgrig import files, proc
from pgrig.errors import PgrigError, WorkdirError
from pgrig.files import write_atomically

_STUDY: ContextVar[str] = ContextVar("pgrig_study", default="")
FILE_XATTR = "user.pgrig"  # on a file pgrig made in a target (probes' test files)
_RUN_OF = re.compile(r"-\d{8}-\d{6}")  # what a study id adds to its campaign's name
FILES = "files"  # the state directory's registry of the files probes made
# Who made a directory: its owner record (``pgrig.hosts.owner``), and in a scratch
# directory in /tmp "pid host" of the pgrig that made it (``workdir.write_owner``)
OWNER_FILE = ".pgrig-owner.json"
MAKER_FILE = ".pgrig-owner"


def state_dir() -> Path:
    """Where pgrig keeps its records between runs: work directories, registered files,
    lossy mounts, the storage lab, saved kernel settings (``PGRIG_STATE_DIR`` overrides)."""
    override = os.environ.get("PGRIG_STATE_DIR")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    path = Path(override) if override else Path(base) / "pgrig"
    said = f"PGRIG_STATE_DIR={override}" if override else f"HOME={os.environ.get('HOME', '')!r}"
    try:  # HOME=/nonexistent was a PermissionError traceback, a marked directory left;
        # PGRIG_STATE_DIR naming a file, a traceback after a study was created
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is not a directory" if path.exists() else exc.strerror
        raise WorkdirError(
            f"pgrig keeps its records of what it made in {path}, which cannot be made:"
            f" {why} ({said})",
            hint="set PGRIG_STATE_DIR (or XDG_STATE_HOME) to a directory you can write",
        ) from None
    return path


@dataclass(frozen=True)
class Leaves:
    """What a target kind leaves between runs where a run's start looks: the
    directories of its records in the state directory (``lossyfs``, ``workdirs``)
    and the name prefixes of its scratch directories in the temporary directory
    (``pgrig-sock-``)."""

    records: tuple[str, ...] = ()
    scratch: tuple[str, ...] = ()


@dataclass(frozen=True)
class Found:
    """What was there, found in one pass (``find``): the entries of each record
    directory that holds any, by its name, and the scratch directories."""

    records: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    scratch: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.records or self.scratch)

    def of(self, leaves: Leaves) -> Found:
        """What of it one kind leaves."""
        return Found(
            {name: self.records[name] for name in leaves.records if name in self.records},
            tuple(p for p in self.scratch if p.name.startswith(leaves.scratch)),
        )


def find(leaves: Iterable[Leaves]) -> Found:
    """The records and scratch directories that ``leaves`` name, in one listing
    of the state directory (and of each record directory in it) and one of the
    temporary directory: what a run's start may have to clean, and whose."""
    wanted = list(leaves)
    names = {name for w in wanted for name in w.records}
    prefixes = tuple(prefix for w in wanted for prefix in w.scratch)
    records: dict[str, tuple[Path, ...]] = {}
    with contextlib.suppress(OSError), os.scandir(state_dir()) as entries:
        for entry in entries:
            if entry.name in names and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError), os.scandir(entry.path) as inside:
                    if held := tuple(p for e in inside if not _live(p := Path(e.path))):
                        records[entry.name] = held
    scratch: list[Path] = []
    if prefixes:
        with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
            scratch = [
                p for e in entries if e.name.startswith(prefixes) and not _live(p := Path(e.path))
            ]
    return Found(records, tuple(sorted(scratch)))


def _live(path: Path) -> bool:
    """Does a pgrig that still runs (or another host's: ``owner_alive``) own this
    record or scratch directory, as the owner it names says? Only a first sieve,
    so that a live pgrig's records do not make a kind look: what it cannot tell
    (a torn record, an older pgrig's, a work directory gone) goes to the kind,
    which judges. A work directory's registry entry names the directory, whose
    owner record says."""
    try:
        text = path.read_text() if path.is_file() else ""
        if text and not text.startswith("{"):
            path = Path(text.partition("\n")[0].strip())
        if path.is_dir():
            made = path / OWNER_FILE
            text = made.read_text() if made.is_file() else (path / MAKER_FILE).read_text()
    except OSError:
        return False
    try:
        data = json.loads(text)
    except ValueError:
        maker, _, there = text.strip().partition(" ")  # a scratch directory's maker
        data = {"pid": int(maker), "controller": there} if maker.isdigit() else {}
    if not isinstance(data, dict):
        return False
    # the records' fields (lossy mount, lab, kernel, files) or a directory's owner record
    pid, host = data.get("owner_pid", data.get("pid")), data.get("host", data.get("controller"))
    start = data.get("owner_start", data.get("start"))
    if not isinstance(pid, int) or not isinstance(host, str):
        return False
    return owner_alive(pid, host, start if isinstance(start, int) else None)


# Directories reports were written to, noted once a process (remember_output_dir)
_REMEMBERED: set[Path] = set()


def _temp_registry() -> Path | None:
    try:
        return state_dir() / "temp-dirs"
    except PgrigError:
        return None


def remember_output_dir(directory: Path) -> None:
    """Note ``directory``, where a report is written, for `pgrig clean` (once a
    process): temporary files a killed pgrig left there are found by it."""
    if directory in _REMEMBERED:
        return
    _REMEMBERED.add(directory)
    registry = _temp_registry()
    if registry is None or registry.parent in (directory, *directory.parents):
        return
    entry = registry / hashlib.sha1(str(directory.resolve()).encode()).hexdigest()[:16]
    with contextlib.suppress(OSError):
        registry.mkdir(parents=True, exist_ok=True)
        entry.write_text(str(directory.resolve()))  # plain: this very function writes atomically


def clean_temp_files() -> list[str]:
    """`pgrig clean`: the temporary files killed pgrig processes left in the
    directories pgrig wrote into; each directory forgotten once swept."""
    registry = _temp_registry()
    lines: list[str] = []
    if registry is None or not registry.is_dir():
        return lines
    for entry in registry.iterdir():
        with contextlib.suppress(OSError):
            directory = Path(entry.read_text().strip())
            lines += [f"removed {p} (a temporary file of a killed pgrig)"
                      for p in files.remove_stale_temp(directory)]  # fmt: skip
            if not any(directory.glob(f".*{files.TMP_SUFFIX}")):
                entry.unlink()
    return lines


def process_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot): a PID's identity over time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_alive(pid: int, host: str, start: int | None = None) -> bool:
    """Does the pgrig process that wrote a record (a work directory's marker, a
    mount or lab record) still own it? A record written on another host is
    always alive to us: its owner cannot be seen from here (a shared home or
    state directory), and judging it dead would delete another machine's live
    work. On this host: the PID runs and, when the record kept it, with the same
    start time (a recycled PID is not the owner)."""
    if host != socket.gethostname():
        return True
    if not proc.pid_alive(pid):
        return False
    now = process_start_time(pid)
    return start is None or now is None or now == start


def current_study() -> str:
    """The study whose records this process is writing ("" outside a study)."""
    return _STUDY.get()


@contextlib.contextmanager
def studying(study: str) -> Iterator[None]:
    """Records created inside the block belong to ``study``."""
    token = _STUDY.set(study)
    try:
        yield
    finally:
        _STUDY.reset(token)


def removable(record_study: str, campaign: str | None) -> bool:
    """May a run of ``campaign`` (None: ``pgrig clean``, every study) remove an
    orphan that the study ``record_study`` left? Yes when it is the same study: its
    id is the campaign's name (a campaign file) or the name and the start time (the
    quick study, ``name-YYYYmmdd-HHMMSS``). A record of an older pgrig names no
    study ("") and is left to ``pgrig clean``."""
    if campaign is None:
        return True
    if record_study == campaign:
        return True
    started = record_study[len(campaign) :] if record_study.startswith(campaign) else ""
    return bool(_RUN_OF.fullmatch(started))


def create_exclusively(target: Path) -> None:
    """Create the file ``target`` so that it is provably ours (probes' test files):
    refuse if anything is there already - it may be someone's data. The file is
    marked and registered (path, token, owner) like a work directory, so that
    after ``kill -9`` the next run or ``pgrig clean`` removes it - that file and
    no other; ``remove_file`` removes it and its entry."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise WorkdirError(
            f"{target} already exists; pgrig will not overwrite it",
            hint="remove it if it is left over from an interrupted pgrig run "
            "(`pgrig clean` removes those pgrig registered)",
        ) from None
    except OSError as exc:
        raise WorkdirError(
            f"cannot create {target}: {exc.strerror}",
            hint="choose a target directory you can write to",
        ) from exc
    # A file cannot hold a marker file: the mark is an extended attribute, which
    # a file made later under the same name (even with the same inode number)
    # lacks. A filesystem without user xattrs gets no mark: never cleaned.
    token = f"{os.getpid()}@{socket.gethostname()}:{time.time_ns()}"
    try:
        os.setxattr(fd, FILE_XATTR, token.encode())
    except OSError:
        token = ""
    finally:
        os.close(fd)
    if not token:
        return
    entry = _file_entry(target)
    entry.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "path": str(target.resolve()),
        "token": token,
        "owner_pid": os.getpid(),
        "host": socket.gethostname(),
    }
    write_atomically(entry, json.dumps(record))


def _file_entry(target: Path) -> Path:
    digest = hashlib.sha1(str(target.resolve()).encode()).hexdigest()[:16]
    return state_dir() / FILES / digest


def remove_file(target: Path) -> None:
    """Remove a file ``create_exclusively`` made, and its registry entry."""
    entry = _file_entry(target)
    target.unlink(missing_ok=True)
    entry.unlink(missing_ok=True)


def clean_orphan_files() -> list[str]:
    """Remove the registered files whose pgrig is gone - only when the path is
    still the very file it created (its extended attribute holds the token)."""
    removed: list[str] = []
    registry = state_dir() / FILES
    if not registry.is_dir():
        return removed
    for entry in registry.iterdir():
        try:
            record = json.loads(entry.read_text())
            path, token = Path(record["path"]), str(record["token"])
            owner, host = int(record["owner_pid"]), record["host"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not one of ours to judge
        if host == socket.gethostname() and proc.pid_alive(owner):
            continue  # its pgrig still runs
        try:
            mark = os.getxattr(path, FILE_XATTR).decode()
        except FileNotFoundError:
            entry.unlink(missing_ok=True)
            continue
        except OSError:
            mark = ""  # no mark: a file pgrig did not make
        if mark == token:
            path.unlink(missing_ok=True)
            removed.append(str(path))
        entry.unlink(missing_ok=True)
    return removed
