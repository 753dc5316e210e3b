"""The one interface every kind of target fills (fio's ``ioengine_ops``): which
targets it claims, what it refuses before anything is created, what it builds,
how its server comes up and goes, what a killed run of it leaves behind, and how
the report describes it.

A kind is one module holding a ``TargetKind`` subclass, registered through the
``pgrig.plugins`` entry points (``pgrig.registry``). ``pgrig.lifecycle`` and
the runner ask the kind;
neither names one. docs/targets.md shows how to add one.

A target while a study runs is a ``Target``: its campaign ``spec``, its
``kind``, what the kind's check found (``Checked``, frozen), the ``Context``
steps act through, and ``Live``: what exists while it runs (the cluster, the
captured environment, a crash's evidence).

A remote kind (a server on another host, later) fills the same interface: its
``check`` reaches the host and refuses what cannot work there (unreachable, no
binaries, no permission); its ``server`` starts or connects and sets
``ctx.conn`` to an address this machine can reach (never a unix socket);
``ctx.running.server_pid`` stays None unless the monitor can see the process; its
``clean`` removes only what a killed pgrig left on that host (the host's own
state directory, judged by ``pgrig.ownership.owner_alive`` there); its
``describe`` names the host.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from pgrig import calibration, environment
from pgrig.clients import OneHost
from pgrig.environment import remote as remote_environment
from pgrig.errors import ClusterError
from pgrig.ownership import Found, Leaves
from pgrig.schema import given_checked
from pgrig.step import Action, Context, Prepare, Step
from pgrig.storage.target import LabSpec

if TYPE_CHECKING:  # types only: lower rooms, imported where they are used
    from _typeshed import DataclassInstance as Result

    from pgrig.cluster.profiles import Profile
    from pgrig.cluster.server import Cluster, Server, ServerLost
    from pgrig.document.model import Section
    from pgrig.hosts.executor import Executor
    from pgrig.pgsource.binaries import PgBinaries
    from pgrig.results import Environment, ResultKind, RunRecord, Study
    from pgrig.schema import Checked as CheckedKeys
    from pgrig.schema import Schema, Table
    from pgrig.ui import Step as ProgressLine
    from pgrig.ui import Ui


THIS_MACHINE = "this machine"

# A kind's own ``[[target]]`` keys as its ``parse`` read them, and what its
# ``check`` found (``Checked.state``): typed per kind, read through
# ``TargetKind.options`` and ``TargetKind.state``.
OptionsT = TypeVar("OptionsT", covariant=True)
StateT = TypeVar("StateT", covariant=True)


@dataclass(frozen=True)
class InitdbSpec:
    encoding: str = "UTF8"
    locale: str = "C"
    wal_segsize_mb: int | None = None
    data_checksums: bool = False


@dataclass(frozen=True)
class TargetSpec:
    """Where PostgreSQL runs for one column of the comparison (a campaign's
    ``[[target]]``, parsed by ``pgrig.campaign``)."""

    name: str
    directory: Path | None = None  # the storage under test: the cluster goes in here
    dsn: str | None = None  # or an existing server
    wal_directory: Path | None = None  # initdb --waldir on another disk
    tablespace: str | None = None  # directory (created in our cluster) or existing name
    index_tablespace: str | None = None
    pg_bin: str | None = None
    profile: str = "oltp"
    settings: dict[str, str] = field(default_factory=dict)
    initdb: InitdbSpec = field(default_factory=InitdbSpec)
    os_user: str | None = None
    lab: LabSpec | None = None  # built by the storage lab: filesystem, I/O cap, memory limit
    # The settings axes' values this variant runs with (also in ``settings``).
    axes: tuple[tuple[str, str], ...] = ()
    # ``kind = "..."``: a registered target kind (docs/targets.md); None: the kind
    # that claims these keys (directory, dsn, storage lab)
    kind: str | None = None
    # that kind's own keys, as its ``parse`` returned them: read them typed
    # through ``TargetKind.options``
    options: object = None
    # Kernel settings of an axis (vm.dirty_*, clocksource): set around each of this
    # variant's steps, restored after (fidelity: storage/kernel.py)
    kernel: tuple[tuple[str, str], ...] = ()
    # How the clients reach a cluster pgrig creates: its private unix socket, or
    # "tcp": 127.0.0.1 with a password (the seeds' clients came over the network)
    listen: str = "socket"

    @property
    def planned_directory(self) -> Path | None:
        """Where probes and the cluster go; for a filesystem the lab builds, a
        stand-in under its base until it exists."""
        if self.lab is not None and self.lab.fs is not None and self.lab.base is not None:
            return Path(self.lab.base) / f"pgrig-fs-{self.name}" / "mnt"
        return self.directory


# pgrig's own connections beside a workload's clients: the monitor's sampler
# and the control connection (counts, checkpoints, resets).
OWN_CONNECTIONS = 2


@dataclass(frozen=True)
class Demands:
    """What the study asks of every target, known before anything is created."""

    need_bytes: int = 0  # the target's peak disk use (probes, data)
    yes: bool = False  # the user allowed destructive steps on a server pgrig did not create
    # why the workloads may not run on a server pgrig did not create; None: harmless
    destructive: str | None = None
    restore: bool = False  # reset = "restore": the data is dropped and copied back
    power_loss: str | None = None  # the workload that cuts the power (a lossy filesystem)
    source: str = "command line"  # where the targets were given: "command line" or the file
    # the most client connections one run opens, and the workload that opens them
    # (pgrig's own, OWN_CONNECTIONS, come on top)
    clients: int = 0
    clients_of: str = ""
    workloads: tuple[str, ...] = ()  # the campaign's workloads as (type) names, in order


def as_written(spec: TargetSpec, source: str, key: str, option: str | None = None) -> str:
    """A target's key as the user wrote it: the command-line option of the
    quick study, else the campaign file's target and key."""
    if source == "command line":
        return option or "--" + key.replace("_", "-")
    return f"{source}: target {spec.name}: {key}"


def directory_option(spec: TargetSpec, source: str) -> str:
    """What to change to give the target another directory (an error's hint)."""
    if source == "command line":
        return "--target"
    return f"directory (target {spec.name} in {source})"


def settings_option(spec: TargetSpec, source: str) -> str:
    """Where the target's setting overrides were written (an error names it)."""
    if source == "command line":
        return "--set"
    return f"{source}: target {spec.name} set"


@dataclass(frozen=True)
class Checked:
    """What a kind's ``check`` found; fixed for the whole study."""

    bins: PgBinaries
    profile: Profile | None  # None: not pgrig's server (its settings are read once connected)
    directory: Path | None  # the storage under test as given; None: none
    owned: bool  # pgrig creates the server, or --yes allows dropping data in it
    adapted: tuple[str, ...] = ()  # what the profile became on this major (for the report)
    # why the target cannot be built here (tools, loop devices): it is skipped with
    # this reason and the rest of the study runs
    unavailable: str | None = None
    # the kind's own checked values (the lab: its resolved spec; a remote target:
    # its hosts), read typed through ``TargetKind.state``
    state: object = None
    load_hosts: int = 1  # the machines each running the workload's clients (``load_hosts``)
    # Where the target is, in words, as the check found it (its ``where(spec)``
    # before anything is checked): the plan's and the calibration's word for it.
    where: str = field(kw_only=True)
    # The machines its runs load (its server's, its load generators'): targets
    # run at once (``concurrent = true``) must not share one, and a baseline of
    # this machine says something only of a target that runs here.
    machines: frozenset[str] = field(default=frozenset({THIS_MACHINE}), kw_only=True)


@dataclass
class Live:
    """What exists of the target while the study runs: filled by its kind."""

    directory: Path | None  # where the cluster and the probes go (built storage moves it)
    tablespaces: dict[str, str | None]  # names for pgbench -i: given, or made from directories
    cluster: Cluster | None = None  # the cluster pgrig created (None: not ours)
    # The server pgrig made, on whichever host: what the recorder revives after a crash.
    server: Server | None = None
    env: Environment | None = None  # the machine as this target's server sees it
    lost: ServerLost | None = None  # the server did not come back after a crash
    kept: tuple[Path, Path] | None = None  # (data directory, log) when kept
    # The storage lab's cgroups (their cgroup.procs files) the server starts in.
    cgroups: tuple[str, ...] = ()
    # Where the storage probes run on the server's host (``ctx.host``) when that is
    # another machine: a directory its kind made there. None: ``directory``, here.
    probes: Path | None = None


class Target:
    """One target while a campaign runs (a ``TargetView`` for workloads)."""

    def __init__(
        self, spec: TargetSpec, kind: TargetKind[object, object], checked: Checked
    ) -> None:
        self.spec = spec
        self.kind = kind
        self.checked = checked
        # What the check settled, fixed for the study (``live`` is what changes).
        self.name = spec.name
        self.bins: PgBinaries = checked.bins
        self.profile: Profile | None = checked.profile
        self.owned = checked.owned
        # Where it is in words, and how many machines run its clients, as the
        # check found them (an inventory is not read again).
        self.storage: str = checked.where
        self.load_hosts: int = checked.load_hosts
        self.machines: frozenset[str] = checked.machines
        scratch = checked.directory or Path.cwd()
        self.ctx = Context(
            bins=checked.bins,
            target=scratch,
            scratch=scratch,
            clients=OneHost(checked.bins.client_bin_dir),  # a remote kind's server() replaces it
        )
        self.live = Live(
            checked.directory,
            {"tablespace": spec.tablespace, "index_tablespace": spec.index_tablespace},
        )

    @property
    def directory(self) -> Path | None:
        return self.live.directory

    @property
    def probe_directory(self) -> Path | None:
        """Where the storage probes run (None: no probes)."""
        return self.live.probes or self.live.directory

    @property
    def tablespaces(self) -> dict[str, str | None]:
        return self.live.tablespaces

    @property
    def cluster(self) -> Cluster | None:
        return self.live.cluster

    @property
    def server(self) -> Server | None:
        """The server pgrig made, on whichever host (``Live.server``)."""
        return self.live.server

    @property
    def env(self) -> Environment | None:
        return self.live.env

    @property
    def lost(self) -> ServerLost | None:
        return self.live.lost

    @contextlib.contextmanager
    def scoped(self, **fields: Any) -> Iterator[None]:
        """The Context with these fields for the ``with`` block, and those fields
        as they were after it (whatever else changed meanwhile stays): what a
        kind's ``server`` sets for its server's life, undone in one place."""
        before = {name: getattr(self.ctx, name) for name in fields}
        self.ctx = replace(self.ctx, **fields)
        try:
            yield
        finally:
            self.ctx = replace(self.ctx, **before)

    def moved_to(self, directory: Path) -> None:
        """The kind built the target's storage: the cluster and the probes go there."""
        self.live.directory = directory
        self.ctx = replace(self.ctx, target=directory, scratch=directory)


def build_action(calibrate: str | None = None) -> Action:
    """Builds a target's storage: ``Context.build``, which the runner points at
    ``TargetKind.storage`` entered for the rest of the study. ``calibrate``: the
    calibration kind its seconds are recorded under, for the next plan."""

    def action(ctx: Context, line: ProgressLine) -> tuple[Result, str]:
        if ctx.build is None:
            raise AssertionError("a build step runs inside the runner, which sets Context.build")
        started, machine = time.monotonic(), calibration.busy()
        out = ctx.build()
        if calibrate is not None:
            calibration.record(calibrate, 1, max(0.01, time.monotonic() - started), machine)
        return out

    return action


class TargetKind(ABC, Generic[OptionsT, StateT]):
    """A kind of target: one subclass per module, one instance registered in
    ``pgrig.registry`` (``TargetKind[Options, State]``: the types of its own keys
    and of what its check found; ``None`` where it has none).

    A target names its kind with ``kind = "NAME"`` in the campaign, and then
    may hold the kind's own ``schema`` keys; without ``kind`` the first
    registered kind whose ``claims`` says so takes it (the built-in kinds are
    told apart by the keys a target has, as campaigns always wrote them)."""

    name: ClassVar[str]  # the campaign's ``kind = "..."`` and the report's word for it
    # Where it comes among the kinds: without ``kind = ...`` a target is the first
    # kind that claims it (the entry points load in no set order). pgrig's own
    # are 10-50; others come after.
    order: ClassVar[int] = 100
    summary: ClassVar[str]  # one line for docs/targets.md and the report
    schema: ClassVar[Schema | None] = None  # its own [[target]] keys (with ``kind``)
    # A key of its own schema whose presence chooses this kind without ``kind = ...``
    # (a remote target's ``host``); None: chosen by ``kind`` or ``claims``.
    claim_key: ClassVar[str | None] = None
    kinds: ClassVar[tuple[ResultKind, ...]] = ()  # what its build step records
    # Its step actions (``Call(name, ...)`` in its steps), added to the registry's
    # when it is registered.
    actions: ClassVar[Mapping[str, Callable[..., Action | Prepare]]] = {}
    # pgrig creates (and removes) the server; False: someone else's server, whose
    # data workloads drop only with --yes
    creates_server: ClassVar[bool] = True
    # ``directory`` is the storage under test and must exist before anything runs
    # (checked first, named as the user wrote it); False: the kind makes it itself
    directory_must_exist: ClassVar[bool] = True
    # ``pgrig clean`` and a run's start clean kind by kind, lowest first: what keeps
    # others busy goes first (a mount before the work directories inside it)
    clean_rank: ClassVar[int] = 50
    # What it leaves between runs, which a run's start finds for it in one look at
    # the state and temporary directories (``lifecycle.clean_orphans``): its
    # ``clean`` is asked only when some of it is there (or ``left_beyond``)
    leaves: ClassVar[Leaves] = Leaves()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parse" in cls.__dict__:  # one written as parse(self, table) still works
            cls.parse = given_checked(cls.__dict__["parse"])  # type: ignore[method-assign]

    def parse(self, table: Table, read: CheckedKeys) -> OptionsT | None:
        """Its own keys of a ``[[target]]`` table (``TargetSpec.options``), made
        from ``read``: its ``schema``'s keys as the campaign read them, in the one
        pass of the table that reads the common keys too (``Checked.split``):
        ``read.values``, and ``read.owned`` for the keys with readers of its own
        (``schema.custom``), which it calls, then the refusal of its keys if any
        (so call them all). Its checks come before the common keys' readers.
        Errors via ``table.error``. None: no keys of its own. Without a
        ``parse`` of its own a kind with a ``schema`` has its keys as a dict by
        attribute (a ``TargetKind[dict[str, Any], ...]``). A ``parse(self,
        table)`` (the interface before) reads its keys itself (``read_keys``)."""
        if self.schema is None:
            return None
        values = read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}
        return cast(OptionsT, values)

    def read_keys(self, table: Table) -> dict[str, Any]:
        """Its ``schema``'s keys of a ``[[target]]`` table, by attribute: what a
        ``parse(self, table)`` (the interface before ``read``) built its options
        from. Keys with readers of its own are read by its ``parse``."""
        if self.schema is None:
            return {}
        return {k.attr: k.read(table, k.name, k.default) for k in self.schema.keys}

    def options(self, spec: TargetSpec) -> OptionsT:
        """The target's own keys as this kind's ``parse`` made them."""
        return cast(OptionsT, spec.options)  # made by our parse: the one place they are typed

    def state(self, t: Target) -> StateT:
        """What this kind's ``check`` found for the target (``Checked.state``)."""
        return cast(StateT, t.checked.state)  # set by our check: the one place it is typed

    def claims(self, spec: TargetSpec, power_loss: str | None) -> bool:
        """Without ``kind = ...``: is this target of this kind? (A power-loss
        workload puts every cluster on the lossy filesystem.)"""
        return False

    @abstractmethod
    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        """Everything that can be refused, refused before anything is created
        (raise a ``PgrigError`` naming the target, the key and the fix). What
        the user should know but is no error goes to ``notes``."""

    def check_uninstalled(self, spec: TargetSpec, source: str, notes: list[str]) -> None:
        """``pgrig plan`` of a PostgreSQL version not installed yet (``check``
        needs its binaries): refuse what can be refused without them; the run
        checks the rest once it has installed them. By default nothing can be
        checked: ``notes`` says so (a remote server's host, say, is reached only
        by ``check``)."""
        if self.creates_server:
            notes.append(
                f"target {spec.name}: PostgreSQL {spec.pg_bin} is not installed yet: its "
                f"initdb locale {spec.initdb.locale!r}, profile and settings were not "
                "checked; `pgrig run` checks them once it has installed it"
            )

    def check_together(self, targets: Sequence[Target], notes: list[str]) -> None:
        """What can only be refused over all this kind's targets at once (their
        backing files on one disk); called after every ``check``. What is no
        error but should be known goes to ``notes``."""
        return None

    def build_step(self, spec: TargetSpec) -> Step | None:
        """The recorded step that builds the target's storage (``pgrig plan``
        lists it); its action is ``Call("target.build")``, which enters
        ``storage`` through the runner; None: nothing to build."""
        return None

    def end_step(self, spec: TargetSpec) -> Step | None:
        """The recorded step at the end of the study, after the servers stopped and
        before ``storage`` is left (an emulated disk measured again: how close
        its emulation stayed); None: nothing to do then."""
        return None

    @contextlib.contextmanager
    def storage(self, t: Target, ui: Ui, *, keep: Callable[[], bool]) -> Iterator[Any]:
        """Build the target's storage for the ``with`` block (call
        ``t.moved_to``) and yield the typed result its build step records.
        Removed after, unless ``keep()`` says so then."""
        yield None

    @abstractmethod
    def server(
        self, t: Target, name: str, study: str, ui: Ui, *, keep: Callable[[], bool]
    ) -> contextlib.AbstractContextManager[None]:
        """The target's server, up for the ``with`` block: ``t.ctx.conn`` set,
        ``t.live.env`` captured (``capture``). A cluster pgrig makes is named
        ``name``; it is removed after, or kept stopped when ``keep()`` says so
        (--keep, or a crash left it down: the evidence)."""

    def clean(self, study: str | None, others: list[str], found: Found) -> list[str]:
        """Remove what killed pgrig runs of ``study`` left (None: of any study;
        pgrig.ownership); one line per thing removed. Other studies' orphans are
        described in ``others`` and left alone. ``found``: what of its ``leaves``
        is there (records of live pgrig processes too: judging them is its own)."""
        return []

    def left_beyond(self) -> bool:
        """May it have left something where ``leaves`` does not look (the hosts it
        reached in this process)? Then ``clean`` is asked whatever was found."""
        return False

    def describe(self, t: Target) -> dict[str, Any]:
        """What the study's params record about the target beyond its spec (the
        report's target table reads them)."""
        return {"kind": self.name}

    def where(self, spec: TargetSpec) -> tuple[str, Path | None]:
        """Before anything exists (``pgrig plan``): where the target is, in words,
        and the directory whose free space it needs (None: none here)."""
        return str(spec.directory), spec.directory

    def probes_at(self, spec: TargetSpec) -> Path | None:
        """Before anything exists (``pgrig plan``): where the storage probes will
        run, in the steps' words (None: no probes)."""
        return spec.planned_directory

    def label(self, t: Target) -> str:
        """What a one-target study is "on"."""
        return str(t.directory)

    def memory_limit(self, spec: TargetSpec) -> int | None:
        """The memory the server and its page cache may use (a cgroup's limit);
        None: the machine's."""
        return None

    def load_hosts(self, spec: TargetSpec) -> int:
        """How many machines each run the workload's clients (every one the same
        count): a step says "-c 4 on each of 2 load hosts", the report 8 clients.
        Asked of a target not checked (``pgrig plan``); a kind whose check resolves
        them says them in its ``Checked.load_hosts``."""
        return 1

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        """Its own part of the report (what its build step recorded); None: nothing."""
        return None


def capture(t: Target) -> None:
    """The machine as this target's server sees it, read here: version and settings."""
    assert t.ctx.conn is not None
    env = environment.capture(
        [t.directory or Path.cwd()],
        pg_conninfo=t.ctx.conn.conninfo(),
        bin_dir=t.bins.bin_dir,
        locate=t.bins.path,  # a server-only build's pgbench is a newer installation's
    )
    _captured(t, env)


def capture_on(t: Target, host: Executor, paths: Sequence[str], bin_dir: str) -> None:
    """The same, for a server on another host (a kind that chose that host's
    executor): read through it, ``paths`` and ``bin_dir`` as they are there."""
    assert t.ctx.conn is not None
    conninfo = t.ctx.conn.conninfo()
    _captured(t, remote_environment.capture_on(host, paths, pg_conninfo=conninfo, bin_dir=bin_dir))


def _captured(t: Target, env: Environment) -> None:
    t.live.env = env
    if env.postgres is None:
        assert t.ctx.conn is not None
        raise ClusterError(
            f"cannot read the server's version and settings from {t.ctx.conn.describe()}"
        )


__all__ = [
    "OWN_CONNECTIONS",
    "StateT",
    "THIS_MACHINE",
    "Checked",
    "Demands",
    "InitdbSpec",
    "Live",
    "Target",
    "TargetKind",
    "TargetSpec",
    "as_written",
    "build_action",
    "capture",
    "capture_on",
    "directory_option",
    "settings_option",
]
