"""The unit the runner executes and the store records: one ``Step`` -> one ``RunRecord``.

Probes and workloads turn a plan into steps; each step's ``action`` runs one
real tool and returns its typed result and raw output. The runner does the
rest (progress, timing, recording, failure handling), so every tool is
recorded the same way.

A step is data: its ``action`` and ``prepare`` are ``Call``s naming an action
registered in ``pgrig.registry.ACTIONS`` and its plain-data parameters, resolved
only when the step runs, against the Context of the target it runs on (whose
``host`` is the server's machine). So a step can be listed, compared, pickled
and sent to another host's executor, and what it does is found in one table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgrig.clients import Clients
from pgrig.cluster.loadwal import Restartable
from pgrig.cluster.server import Cluster
from pgrig.conninfo import Conn
from pgrig.hosts.executor import Executor
from pgrig.hosts.local import HERE
from pgrig.lossyfs.target import LossyTarget
from pgrig.monitor.sampling import ProcessesHere
from pgrig.monitor.verdict import Finding
from pgrig.monitor.watched import HostSampling
from pgrig.pgsource.binaries import PgBinaries
from pgrig.storage.emulator import EmulationAtEnd, EmulatorReading
from pgrig.storage.memcg import MemoryStats
from pgrig.ui import Step as ProgressLine

if TYPE_CHECKING:  # typeshed's name for "any dataclass instance": no runtime class
    from _typeshed import DataclassInstance as Result


class Skip(Exception):
    """Raised by an action that cannot run here; recorded as status "skipped"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class StepKey:
    """Where a step sits in a study: target, workload, its parameters, its repeat.

    Rendered to the store's key string (``disk/tpcb/s20/read-write/c8/d20/r2``),
    which is what resume matches on: results files written by earlier versions
    carry exactly these strings.
    """

    target: str
    workload: str  # a workload's name, or "probe"
    parts: tuple[str, ...] = ()
    repeat: int | None = None  # None: a step that is not repeated
    tail: tuple[str, ...] = ()  # below the repeat, e.g. the run's "monitor" record

    def __str__(self) -> str:
        items = [self.target, self.workload, *self.parts]
        if self.repeat is not None:
            items.append(f"r{self.repeat}")
        return "/".join([*items, *self.tail])

    def with_repeat(self, repeat: int | None) -> StepKey:
        return replace(self, repeat=repeat)

    def below(self, *tail: str) -> StepKey:
        return replace(self, tail=(*self.tail, *tail))


@dataclass(frozen=True)
class Extra:
    """A typed result an action made besides its own, recorded below the step's
    key: a multi-host run's per-host figures under ``tail`` "hosts"."""

    tail: str
    kind: str  # the name of a registered result kind
    value: Result


@dataclass
class Running:
    """What changes on a target while its steps run: the one part of a (frozen)
    ``Context`` that steps write, each field with the one writer it has.

    ``begin`` clears what a step says about its own run, so that nothing of one
    step's run is read as the next one's.
    """

    # The postmaster, when it runs on this machine: set when the server starts and
    # again when a step restarts it (a reset, the durability check's crashes), which
    # the monitor sees at its next look. None: not watched here.
    server_pid: int | None = None
    # The best tps measured so far per mode on this target: a measured run's
    # transaction log is sampled so that its size stays bounded.
    observed: dict[str, float] = field(default_factory=dict)
    # What the step's action made besides its result: recorded once it succeeds.
    extra: list[Extra] = field(default_factory=list)
    # What the run's load generators on other machines say for its verdict
    # (client-bound load hosts); set by the action, read by the monitor.
    load_finding: Finding | None = None
    # When the measured pgbench started (this machine's clock, epoch seconds), set
    # by an action whose pgbench runs elsewhere: the monitor's time axis. None: the
    # monitor sees pgbench start here.
    client_started: float | None = None
    # A load host whose share of a summed figure is not the others' (its link or
    # its machine held it back), said in a sentence: the run is disturbed.
    load_imbalance: str | None = None

    def begin(self) -> None:
        """A step starts: what the last one said of its run is gone."""
        self.extra.clear()
        self.load_finding = None
        self.client_started = None
        self.load_imbalance = None


@dataclass(frozen=True)
class Context:
    """What a step reads to reach the machine and the server under test, for one
    target. A target's setup makes a new one as it learns more (``replace``: the
    server's address once it is up); what changes while steps run is ``running``."""

    bins: PgBinaries
    target: Path  # the directory on the storage under test
    scratch: Path  # where tools may write temporary files (logs)
    # Where the workloads' pgbench clients run, chosen by the target kind: this
    # machine (or a storage lab's pinned clients), or a remote target's load hosts.
    clients: Clients
    conn: Conn | None = None  # set once the server is up
    # The server's host, chosen by the target kind with how the monitor samples
    # it: this machine (its processes told apart), or another through its
    # executor (the host as a whole, ``host_devices`` its disks).
    host: Executor = HERE
    sampling: type[HostSampling] = ProcessesHere
    host_bin_dir: str | None = None  # PostgreSQL's bin directory there, if not this machine's
    host_devices: tuple[str, ...] = ()  # the block devices under its data directory
    # Where a client on this machine copies the server when told "the target's own
    # storage" (a base backup's default), if not ``target``: set by a kind whose
    # ``target`` is a directory on another host.
    copy_here: Path | None = None
    cluster: Cluster | None = None  # the cluster pgrig created (None: an existing server)
    # pgrig's server, on whichever host, which a load may restart with other
    # settings (``load_wal``): ``cluster`` here, a host's server there. None: a
    # server pgrig did not make.
    restartable: Restartable | None = None
    lossy: LossyTarget | None = None  # the cluster runs on the lossy filesystem (power loss)
    # Another target's directory by name, for a workload that writes there (a base
    # backup's ``to``); None: no such target, or it has no directory.
    peer: Callable[[str], Path | None] = field(default=lambda _name: None)
    # Runs in the server's and the probes' processes before exec: puts them into
    # a storage-lab target's cgroup (I/O cap, memory limit). None: nothing to do.
    preexec: Callable[[], None] | None = None
    # Reads a storage-lab target's memory cgroup (limit hits, peak, OOM kills);
    # None: the target has no memory limit.
    memory: Callable[[], MemoryStats | None] | None = None
    # Reads a latency layer's process (its CPU, its counters), for the record of
    # what it took over each run; None: no emulator under the target.
    emulator: Callable[[], EmulatorReading | None] | None = None
    # Measures the target's latency layers again as their build calibrated them,
    # for the step at the end of the study (kind "emulator_end"); None: none.
    remeasure: Callable[[], EmulationAtEnd] | None = None
    # Called between an action's events (the durability check's "crashed",
    # "recovered", "end"): where `pgrig durability`'s tests tamper. None: nothing.
    on_event: Callable[[str, int], None] | None = None
    # Builds the target's storage for the rest of the study (the runner's, in the
    # Context of the step ``TargetKind.build_step`` makes only): its result and raw output.
    build: Callable[[], tuple[Result, str]] | None = None
    # Shared by every Context made from this one with ``replace``: the target's.
    running: Running = field(default_factory=Running)

    # What the monitor reads (``pgrig.monitor.watched.Watched``), as it changes.
    @property
    def server_pid(self) -> int | None:
        return self.running.server_pid

    @property
    def load_finding(self) -> Finding | None:
        return self.running.load_finding

    @property
    def load_imbalance(self) -> str | None:
        return self.running.load_imbalance

    @property
    def client_started(self) -> float | None:
        return self.running.client_started

    def tool_dir(self, tool: str) -> Path:
        """Where a step runs a PostgreSQL tool from: on the server's host when
        that is another machine (the storage probes measure its disk)."""
        if self.host_bin_dir is not None:  # set with ``host`` alone
            return Path(self.host_bin_dir)
        return self.bins.tool_dir(tool)


# What a registered action resolves to: it runs on a Context, on a progress line,
# and returns its typed result (a dataclass of ``pgrig.results`` or a plug-in's,
# which the store keeps as JSON) and the tool's raw output.
Action = Callable[[Context, ProgressLine], "tuple[Result, str]"]
Prepare = Callable[[Context, ProgressLine], None]


@dataclass(frozen=True)
class Call:
    """A registered action and its parameters: what a step runs, as data.

    ``name`` is a key of ``pgrig.registry.ACTIONS``, whose value is a function of
    ``args`` returning the ``Action`` (or ``Prepare``) that runs on the step's
    Context. Parameters are plain data: str, numbers, bools, tuples, dicts,
    Paths, frozen dataclasses such as a workload's spec.

    Why a name and its arguments rather than one dataclass per action with a
    ``run`` method: every action was already a function of its parameters
    returning what runs on the Context; registering those functions keeps each
    body where and as it was, makes the table of everything a step can do one
    dict beside ``WORKLOADS``, and adding an action stays one function plus one
    line. The price, arguments checked when the step runs rather than by mypy,
    is paid back by tests/test_steps_as_data.py, which binds the arguments of
    every step of every example campaign to its function's signature.
    """

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    key: StepKey
    kind: str  # the name of a registered result kind (pgrig.registry)
    label: str  # shown on the progress line
    params: dict[str, Any]
    action: Call  # resolved through pgrig.registry.ACTIONS when the step runs
    total: float | None = None  # progress total (e.g. seconds) when known up front
    tools: tuple[str, ...] = ()  # names whose versions are recorded with the result
    monitored: bool = False  # a measured run: host and server are sampled while it runs
    # Runs before the measured part and outside the monitor's window (reset,
    # warm-up, CHECKPOINT), on the same progress line.
    prepare: Call | None = None
    estimate_s: float = 0.0  # what `pgrig plan` adds up
    # Creates the data later steps use (a load): on a resumed campaign it runs
    # again when later steps still need the data, but is recorded only once.
    creates_data: bool = False
    # The data such a step leaves ("pgbench scale 50"); when an earlier step left
    # the same on the target and ``reused_s`` is set, the plan counts that instead
    # (the step finds it there and keeps it: seed002's base backup of the TPC-B
    # data took 1 s where 80 s of loading were planned).
    leaves: str = ""
    reused_s: float | None = None
    # False: the step stops the server on purpose (a crash test), and the
    # heartbeat of steps outside measured runs (recorder) would call it hung.
    heartbeat: bool = True

    @cached_property
    def id(self) -> str:
        """The key as the store keeps it: made once per step, however many parts
        (schedule, recorder, store) ask it. (A frozen dataclass's
        ``cached_property`` keeps it in the instance's ``__dict__``, beside the
        fields: ``replace`` makes a step that works out its own.)"""
        return str(self.key)
