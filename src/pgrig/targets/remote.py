"""A throwaway server on another host, driven by pgbench from others (issue 17
parts 3, 5 and 6): the hosts come from the campaign's Ansible inventory.

``host = "db1"`` is where the server runs
(``pgrig.cluster.hosted.HostedServer``, the cluster's lifecycle through the
host's executor: ``[target.initdb]``, ``wal_directory`` and tablespaces in
directories on the host, revived after a crash like a local cluster;
scram-sha-256, a generated password, listening on the host's address and
admitting only the load hosts and this machine); ``load_hosts = ["c1", "c2"]``
(hosts or groups) is where every measured pgbench runs, all started at one
barrier (``pgrig.load.run_pgbench``); without it, on the server's own
host (seed 000). Loads, warm-ups and the monitor's server sampling run from
this machine over TCP; the host's environment (``pgrig.environment.remote``)
and its CPUs and disks during a run (the monitor, ``Context.host``) are read on
the host through its executor. The storage probes run there too, in a directory
beside the data directory (``storage``), and the target's profile is rendered
for the host's CPUs and memory into the server's pgrig.conf. ``--keep`` leaves
the server running; ``pgrig clean --inventory`` removes it.

A measured run records the merged run as its ``pgbench_run`` (tps summed,
latency percentiles from every host's pooled per-transaction log) and, below
its key, a ``load_hosts`` record: per-host tps and percentiles, the start
spread and the clock offsets. A load host that ran out of CPU goes into the
run's verdict (``client_host``); the server's own host, when pgbench shares
it and its CPUs are saturated, as ``shared_host``.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pgrig import proc
from pgrig.clients import Clients
from pgrig.cluster import profiles
from pgrig.cluster.hosted import HostedServer, ServerSpec, make_workdir
from pgrig.cluster.postmaster import SUPERUSER
from pgrig.cluster.server import InitdbOptions, initdb_version_args
from pgrig.errors import BinaryNotFound, HostUnusable, PgrigError, UsageError
from pgrig.hosts import facts, inventory, owner, preflight
from pgrig.hosts.executor import TMP, Executor, reconnect_s
from pgrig.hosts.inventory import Host
from pgrig.hosts.local import LocalExecutor
from pgrig.monitor.sampling import WholeHost
from pgrig.ownership import Found, Leaves
from pgrig.pgsource import binaries
from pgrig.registry.shared import LOAD_HOSTS
from pgrig.registry.target import (
    Checked,
    Demands,
    Target,
    TargetKind,
    capture_on,
    settings_option,
)
from pgrig.schema import Checked as CheckedKeys
from pgrig.schema import Schema, custom, path, port, text
from pgrig.schema import Table as Keys
from pgrig.storage.keys import LAB_SCHEMA
from pgrig.targets import loadhosts, remote_refuse
from pgrig.targets.remote_refuse import (
    Placed,
    server_loads,
    servers_of_others,
    shared_ports,
)
from pgrig.targets.throwaway import (
    connections_fit,
    find_binaries,
    initdb_locale,
    initdb_options,
    no_named_tablespace,
)
from pgrig.ui import Ui
from pgrig.workdb import DATABASE

if TYPE_CHECKING:
    from pgrig.pgsource.binaries import PgBinaries
    from pgrig.registry.target import TargetSpec

SERVER_TOOLS = ("postgres", "initdb", "pg_isready")


def _load_hosts(t: Keys, key: str, given: str | list[object] | None) -> tuple[str, ...]:
    """``load_hosts`` as the schema handed it over (a string or a list)."""
    if given is None:
        return ()  # pgbench on the server's own host, as seed 000 ran it
    names = (given,) if isinstance(given, str) else tuple(given)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise t.error(
            key,
            "load_hosts names the inventory hosts pgbench runs on",
            hint='load_hosts = ["c1", "c2"], or a group: load_hosts = "load"; '
            "leave it out to run pgbench on the server's host",
        )
    return cast(tuple[str, ...], names)


# What each key does on a local target, and why a remote one cannot: the storage
# lab builds filesystems, cgroups, cpusets and FUSE layers on this machine.
_HERE_ONLY = {
    **{k: "the storage lab builds it on this machine" for k in LAB_SCHEMA.names},
    "os_user": "the server on a host runs as that host's postgres account, which pgrig makes",
}


def _here_only_keys(table: Keys, host: str) -> None:
    """Keys a remote target would accept and not apply (issue 40.12: fs, size,
    memory, cpus, latency and os_user were silently ignored, exit 0)."""
    for key in _HERE_ONLY:
        if key in table.data:
            raise table.error(
                key,
                f"{key} is not applied to a server on a remote host ({host}): {_HERE_ONLY[key]}",
                hint=f"drop {key} from this target, or run the target on this machine "
                "(directory = ... without host)",
            )


SCHEMA = Schema(
    "[[target]] remote",
    text("host", None, "the inventory host the server runs on (chooses this kind)"),
    custom("load_hosts", None, "inventory hosts or groups every measured pgbench runs on, "
           "started together", _load_hosts, kind=(str, list),
           shown_default="the server's host"),
    path("inventory", "the Ansible inventory naming them",
         shown_default="`[campaign] inventory`"),
    port("port", 5432, "the server's TCP port on its host"),
    text("host_pg_bin", None, "PostgreSQL's bin directory on the hosts",
         shown_default="the same path as here"),
)  # fmt: skip


@dataclass(frozen=True)
class RemoteOptions:
    """A remote target's own keys (``SCHEMA``)."""

    host: str
    inventory: Path
    load_hosts: tuple[str, ...] = ()
    port: int = 5432
    host_pg_bin: str | None = None

    def where(self) -> str:
        """Where the target is, in words (``TargetKind.where``)."""
        load = ", ".join(self.load_hosts) or "the same host"
        return f"host {self.host}, load from {load} ({self.inventory})"


@dataclass(frozen=True)
class Hosts:
    """What the check found: the hosts, and where PostgreSQL is on them."""

    server: Host
    load: tuple[Host, ...]
    bin_dir: str
    address: str  # the server host's IP address: the server listens there
    port: int  # and its port there
    clients: tuple[str, ...]  # what it admits: the load hosts and this machine, as CIDRs
    inventory: Path  # where the hosts were read (what `pgrig clean --inventory` reads)
    initdb: InitdbOptions  # ``[target.initdb]``, checked against this major's initdb
    # The profile rendered for the server's host (its CPUs and memory), fitted to
    # this major, set.* over it: the server's pgrig.conf.
    settings: tuple[tuple[str, str], ...] = ()
    conf_header: str = ""
    # Each load host's CPUs and pgbench, read there (``facts.survey``).
    load_facts: tuple[facts.LoadHostFacts, ...] = ()

    def placed(self, target: str) -> Placed:
        return Placed(target, self.server, self.address, self.port, self.load)


def _ip(address: str) -> str:
    try:
        return socket.gethostbyname(address)
    except OSError as exc:
        raise HostUnusable(f"cannot resolve {address}: {exc}") from None


def _source_ip(address: str, port: int) -> str:
    """This machine's address towards ``address`` (what the server sees): a UDP
    socket's connect picks the route and sends nothing."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((address, port))
            return str(s.getsockname()[0])
    except OSError as exc:
        raise HostUnusable(f"no route from this machine to {address}: {exc}") from None


def _distinct(server: Host, load_hosts: Sequence[Host]) -> list[Host]:
    """The server's host first, then each load host once (it may be the server's)."""
    return list({h.name: h for h in (server, *load_hosts)}.values())


@dataclass(frozen=True)
class _Open:
    """A target's hosts while it runs: their executors (the server's first),
    pgrig's directory on the server's host and the probes' directory in it."""

    executors: list[Executor]
    home: owner.Workdir
    probes: str


def _profile(
    spec: TargetSpec,
    bins: PgBinaries,
    origin: str,
    host: str,
    machine: profiles.Machine,
    notes: list[str],
) -> tuple[profiles.Profile, str]:
    """The target's profile as the server's host gets it: ``{ram}`` and
    ``{cpus}`` are the host's, fitted to this major (the host's is assumed the
    same), ``set.*`` over it (written at ``origin``); and pgrig.conf's header
    saying so."""
    profile = profiles.load(spec.profile, machine=machine).with_overrides(spec.settings, origin)
    adapted = profiles.validate(profile, bins, segment_mb=spec.initdb.wal_segsize_mb)
    for note in adapted.notes:  # a setting this major renamed or lacks: never silent
        notes.append(f"target {spec.name} (PostgreSQL {bins.version}): {note}")
    for note in profile.scaled:  # a seed's value the host cannot hold: never silent
        notes.append(f"target {spec.name}: profile {profile.name} scaled to {host}: {note}")
    header = (
        f"# profile: {profile.name} ({profile.source}), for {host}: {machine.cpus} CPUs, "
        f"{machine.ram_bytes / 2**30:.1f} GiB\n"
        + "".join(f"# scaled to {host}: {note}\n" for note in profile.scaled)
        + "".join(f"# fitted to PostgreSQL {adapted.version}: {n}\n" for n in adapted.notes)
    )
    return replace(profile, settings=dict(adapted.applied)), header


def _survey(
    executors: Sequence[Executor], load: Sequence[Host], bin_dir: str
) -> dict[str, facts.Survey]:
    """Every host asked once, all at once (as many at a time as the preflight
    reaches them, ``preflight.AT_ONCE``), by name: the server's host (the first
    executor) for its tools and its postgres's version, a load host for its
    pgbench and its version; each for its CPUs and memory and the space in TMP."""
    loading = {h.name for h in load}
    programs, versions = [], []
    for ex in executors:
        serves, loads = ex is executors[0], ex.name in loading
        tools = (SERVER_TOOLS if serves else ()) + (("pgbench",) if loads else ())
        said = (("postgres",) if serves else ()) + (("pgbench",) if loads else ())
        programs.append([f"{bin_dir}/{tool}" for tool in tools])
        versions.append([f"{bin_dir}/{tool}" for tool in said])
    with proc.ContextPool(max_workers=max(1, min(preflight.AT_ONCE, len(executors)))) as pool:
        found = pool.map(facts.survey, executors, programs, versions, [TMP] * len(executors))
        return {s.host: s for s in found}


def _missing(server: facts.Survey, loaders: Sequence[facts.Survey], bin_dir: str) -> list[str]:
    out = [
        f"{server.host} has no {bin_dir}/{tool}"
        for tool in SERVER_TOOLS
        if f"{bin_dir}/{tool}" not in server.present
    ]
    if server.host not in {s.host for s in loaders} and not server.python:
        out.append(f"{server.host} has no python3 (it reads the host's environment)")
    for s in loaders:
        if f"{bin_dir}/pgbench" not in s.present:
            out.append(f"load host {s.host} has no {bin_dir}/pgbench")
        if not s.python:
            out.append(f"load host {s.host} has no python3 (the start barrier's waiter)")
    return out


def _versions(
    spec: TargetSpec,
    bins: PgBinaries,
    server: facts.Survey,
    loaders: Sequence[facts.Survey],
    bin_dir: str,
    notes: list[str],
) -> tuple[facts.LoadHostFacts, ...]:
    """The versions read on the hosts they describe, and each load host's CPUs.
    Refused: a server of another major than this machine's binaries (the profile
    and the initdb options are fitted to those, and the loads run with them), and
    load hosts whose pgbench majors differ (one run's figures would pool two
    builds' per-transaction costs). Said: a load host's pgbench of another major
    than the server's (pgbench's own cost per transaction may differ)."""
    here = facts.major(bins.version)
    there = facts.major(server.versions[f"{bin_dir}/postgres"])
    if there is not None and here is not None and there != here:
        raise UsageError(
            f"target {spec.name}: {server.host} has PostgreSQL {there} in {bin_dir}, this "
            f"machine's binaries are {bins.version}: the profile and [target.initdb] are "
            "fitted to these",
            hint=f"set pg_bin to a {there} installation here, or host_pg_bin to a {here} one "
            f"on {server.host}",
        )
    found = tuple(s.load_host(f"{bin_dir}/pgbench") for s in loaders)
    majors = {f.major for f in found if f.major is not None}
    if len(majors) > 1:
        raise UsageError(
            f"target {spec.name}: the load hosts' pgbench majors differ ("
            + ", ".join(f"{f.host}: {f.pgbench}" for f in found)
            + "): one run's figures would pool what two pgbench builds cost per transaction",
            hint=f"install one PostgreSQL major's pgbench under {bin_dir} on every load host "
            f"(pgrig hosts provision --major {there or here}), or set host_pg_bin",
        )
    for f in found:
        if f.major is not None and there is not None and f.major != there:
            notes.append(
                f"target {spec.name}: pgbench on load host {f.host} is {f.pgbench}, the "
                f"server on {server.host} is PostgreSQL {there}"
            )
    return found


class RemoteKind(TargetKind[RemoteOptions, Hosts]):
    name = "remote"
    order = 10
    summary = "a throwaway server on an inventory host, pgbench from its load hosts"
    schema = SCHEMA
    claim_key = "host"
    kinds = (LOAD_HOSTS,)
    clean_rank = 40
    leaves = Leaves(scratch=(owner.HOSTLOGS,))
    directory_must_exist = False  # only where the load hosts' logs are copied: made here

    def __init__(self) -> None:
        # The hosts this process checked: what ``clean`` looks at (an orphan on a
        # host no campaign names is `pgrig hosts clean`'s).
        self._seen: dict[str, Host] = {}
        self._opened: dict[str, _Open] = {}  # by target: made by ``storage``
        # Every host connected to and checked once per study: by the first check
        # that names it; cleaning and the storage reuse the connection.
        self._pool = preflight.Pool()

    def parse(self, table: Keys, read: CheckedKeys) -> RemoteOptions:
        # Our keys as the campaign's one pass of the table read them (``load_hosts``
        # as given, of its TOML type), made and refused here: the schema calls
        # none of ours. The rest of the table is the campaign's common keys.
        values = read.values | {k.attr: k.read(table, k.name, v) for k, v in read.owned}
        values["inventory"] = values["inventory"] or table.ctx.inventory
        if values["host"] is None:
            raise table.error("host", "a remote target needs the host its server runs on",
                              hint='host = "db1" (a host of the inventory)')  # fmt: skip
        if values["inventory"] is None:
            raise table.error(
                "inventory",
                f"target host {values['host']!r}: no inventory says where it is",
                hint='add inventory = "hosts.ini" to [campaign] (or to the target)',
            )
        _here_only_keys(table, values["host"])
        if not Path(values["inventory"]).is_file():
            raise table.inherited("inventory").error(
                "inventory",
                f"the inventory {values['inventory']} does not exist",
                hint="give the path of an Ansible inventory file (INI or YAML), relative to "
                "the campaign file",
            )
        return RemoteOptions(**values)

    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        remote_refuse.unsupported(spec, demands)  # what this kind cannot run yet
        opts, origin = self.options(spec), settings_option(spec, demands.source)
        inv = inventory.load(opts.inventory)
        server = inv.resolve([opts.host], "host")
        if len(server) != 1:
            raise UsageError(
                f"target {spec.name}: host {opts.host!r} is a group of {len(server)} hosts "
                f"in {inv.path}",
                hint="name one host for the server; groups are for load_hosts",
            )
        load_hosts = tuple(inv.resolve(opts.load_hosts, "load host")) or (server[0],)
        # This machine's part, as a throwaway cluster's: the binaries loads and
        # warm-ups run with, and what initdb of their major refuses (wal_directory and
        # tablespace directories are the server's host's: checked there).
        no_named_tablespace(spec, demands.source)
        initdb = initdb_options(spec)
        bins = find_binaries(spec, binaries.CLIENT_TOOLS)
        initdb_version_args(initdb, bins)
        bin_dir = opts.host_pg_bin or str(bins.bin_dir)
        # What needs no host first (issue 40.14).
        reconnect_s()  # a bad PGRIG_RECONNECT_S: refused now, not when a host is lost
        loaded = remote_refuse.every_load_host(demands, load_hosts)
        remote_refuse.before_hosts(spec, loaded, origin, server[0], load_hosts, notes)
        address = _ip(server[0].address)
        executors = self._pool.get(_distinct(server[0], load_hosts))
        try:
            found = _survey(executors, load_hosts, bin_dir)
            db, loaders = found[server[0].name], [found[h.name] for h in load_hosts]
            if missing := _missing(db, loaders, bin_dir):
                raise BinaryNotFound(  # a missing program, as docs/exit-codes.md lists it: 3
                    f"target {spec.name}: " + "; ".join(missing),
                    hint=f"pgrig hosts provision -i {inv.path} --major {bins.major}, or set "
                    "host_pg_bin to PostgreSQL's bin directory on the hosts",
                )
            load_facts = _versions(spec, bins, db, loaders, bin_dir, notes)
            if demands.need_bytes > db.free:
                raise HostUnusable(
                    f"target {spec.name}: {server[0].name} has {db.free / 2**30:.1f} GiB free "
                    f"in {TMP}, the study needs {demands.need_bytes / 2**30:.1f} GiB",
                    hint=f"free space in {TMP} on {server[0].name}, or use a smaller scale",
                )
            # The profile rendered for the server's host: its CPUs and memory, as read there.
            machine = profiles.Machine(db.memory, db.cpus)
            profile, header = _profile(spec, bins, origin, server[0].name, machine, notes)
            connections_fit(spec, profile, loaded)
            # What only the server's host can say: initdb runs there, with its
            # directories and port.
            initdb_locale(spec, demands.source, executors[0])
            remote_refuse.host_directories(spec, executors[0])
            remote_refuse.port_free(spec, executors[0], server[0], address, opts.port)
            notes += server_loads(spec.name, server[0], load_hosts, opts.load_hosts)
        except BaseException:
            self._pool.close()  # refused: no study runs on them
            raise
        self._seen |= {h.name: h for h in (server[0], *load_hosts)}
        loading = {_ip(h.address) for h in load_hosts}
        clients = loading | {_source_ip(address, opts.port)}
        hosts = Hosts(
            server[0], load_hosts, bin_dir, address, opts.port,
            clients=tuple(f"{ip}/32" for ip in sorted(clients)),
            inventory=opts.inventory,
            initdb=initdb,
            settings=tuple(profile.settings.items()),
            conf_header=header,
            load_facts=load_facts,
        )  # fmt: skip
        # No directory here: the storage probes run on the host, beside the server's
        # data directory (``storage``); ``directory`` only says where the load hosts'
        # logs are kept. The profile is the host's (its memory, not this machine's).
        return Checked(
            bins, profile, None, owned=True, state=hosts, load_hosts=len(load_hosts),
            where=opts.where(),
            machines=frozenset({address, *loading}),  # the server's host and the load hosts
        )  # fmt: skip

    def check_together(self, targets: Sequence[Target], notes: list[str]) -> None:
        placed = [self.state(t).placed(t.name) for t in targets]
        shared_ports(placed)
        servers_of_others(placed, notes)

    @contextlib.contextmanager
    def _host_side(self, t: Target, keep: Callable[[], bool]) -> Iterator[_Open]:
        """Connections to every host, and pgrig's directory on the server's host
        with the probes' directory in it: the data directory goes beside it, on the
        same filesystem. Removed after (it and what is in it are pgrig's), unless
        the server is kept."""
        hosts = self.state(t)
        with contextlib.ExitStack() as stack:
            executors = stack.enter_context(self._pool.claimed(_distinct(hosts.server, hosts.load)))
            db = executors[0]
            home = make_workdir(db)
            # (a host that could not be reached again was said by the server's close)
            stack.callback(
                lambda: None if keep() or db.connection_lost() else db.remove_tree(home.path)
            )
            probes = f"{home.path}/probes"
            db.run(["mkdir", "--", probes], timeout=30, what="mkdir")
            opened = _Open(executors, home, probes)
            t.live.probes = Path(probes)
            stack.enter_context(
                t.scoped(
                    host=db, sampling=WholeHost, host_bin_dir=hosts.bin_dir, target=Path(probes)
                )
            )
            db.adopt = home.started  # a probe: `pgrig clean` stops it after a kill -9
            try:
                yield opened
            finally:
                db.adopt = None
                t.live.probes = None

    @contextlib.contextmanager
    def storage(self, t: Target, ui: Ui, *, keep: Callable[[], bool]) -> Iterator[Any]:
        with self._host_side(t, keep) as opened:
            self._opened[t.name] = opened
            try:
                yield None
            finally:
                del self._opened[t.name]

    @contextlib.contextmanager
    def server(
        self, t: Target, name: str, study: str, ui: Ui, *, keep: Callable[[], bool]
    ) -> Iterator[None]:
        hosts = self.state(t)
        port, address = hosts.port, hosts.address
        kept = keep()  # --keep: asked now, so the server logs where it stays readable
        with contextlib.ExitStack() as stack:
            opened = self._opened.get(t.name) or stack.enter_context(self._host_side(t, keep))
            db = opened.executors[0]
            by_name = {ex.name: ex for ex in opened.executors}
            # The probes are done: their directory goes (rmdir: only if empty).
            db.run(["rmdir", "--", opened.probes], timeout=30, check=False, what="rmdir")
            spec = ServerSpec(
                bin_dir=hosts.bin_dir,
                address=address,
                bins=t.bins,
                port=port,
                clients=hosts.clients,
                settings=hosts.settings
                + ((("logging_collector", "on"), ("log_directory", f"{opened.home.path}/log"))
                   if kept else ()),
                header=hosts.conf_header,
                initdb=hosts.initdb,
                wal_directory=str(t.spec.wal_directory) if t.spec.wal_directory else None,
            )  # fmt: skip
            remote = stack.enter_context(HostedServer(db, spec, opened.home))
            t.live.server = remote  # revived after a crash (Recorder), as a local cluster
            stack.callback(setattr, t.live, "server", None)
            stack.callback(lambda: self._kept(t, remote, ui) if keep() else None)
            # The workloads' own database, as in a local cluster (``reset = "restore"``
            # copies it; a study never writes into ``postgres``).
            with remote.conn().connect() as admin:
                admin.execute(f'CREATE DATABASE "{DATABASE}"')
            conn = remote.conn(DATABASE)
            loaders = [by_name[h.name] for h in hosts.load]
            clients: Clients = loadhosts.Driver(
                loaders, hosts.server.name, hosts.bin_dir, conn, t, hosts.load_facts
            )
            logs = self._log_root(t, name, stack)
            stack.enter_context(t.scoped(
                restartable=remote,  # a load's restart at wal_level=minimal, as a local one
                scratch=logs,
                copy_here=logs,  # a base backup's copy: pg_basebackup runs here
                conn=conn,
                clients=clients,  # every measured run and warm-up from the load hosts
                host=db,  # the monitor samples it as a whole
                sampling=WholeHost,
                host_bin_dir=hosts.bin_dir,
            ))  # fmt: skip
            _tablespaces(t, remote, ui)
            capture_on(t, db, [remote.datadir], hosts.bin_dir)
            assert t.live.env is not None
            devices = tuple(fs.block_device for fs in t.live.env.filesystems if fs.block_device)
            stack.enter_context(t.scoped(host_devices=devices))
            ui.info(
                f"{t.name}: server on {hosts.server.name} ({address}:{port}) in "
                f"{remote.datadir}, pgbench from " + ", ".join(h.name for h in hosts.load)
            )
            yield

    def _kept(self, t: Target, remote: HostedServer, ui: Ui) -> None:
        """--keep: the server stays up on its host; how to reach it, and how it goes."""
        hosts = self.state(t)
        remote.keep()
        inv = hosts.inventory
        ui.info(
            f"{t.name}: kept (--keep), running on {hosts.server.name}: data directory "
            f"{remote.datadir}, log {remote.workdir}/log; reach it there as the postgres "
            f"user: psql -h {remote.workdir} -p {remote.spec.port}, or from here: host="
            f"{hosts.address} port={remote.spec.port} user={SUPERUSER}, password in "
            f"{remote.workdir}/password on {hosts.server.name} (root only). "
            f"`pgrig clean --inventory {inv}` stops and removes it"
        )

    @staticmethod
    def _log_root(t: Target, name: str, stack: contextlib.ExitStack) -> Path:
        """Where the load hosts' logs are copied: kept in the target's
        ``directory`` when it has one, else a temporary directory."""
        if t.spec.directory is not None:
            root = t.spec.directory / f"{name}-load-logs"
            root.mkdir(parents=True, exist_ok=True)
            return root
        return _hostlogs(stack)

    def clean(self, study: str | None, others: list[str], found: Found) -> list[str]:
        """What dead pgrig runs left on the hosts this process checked (their
        owner records, ``pgrig.hosts.owner``); never a live pgrig's."""
        lines = _clean_hostlogs(study, others) if found.scratch else []
        for host in self._seen.values():
            try:
                (ex,) = self._pool.get([host])  # reached by the check: not again
                for left in owner.clean(ex, study=study):
                    if left.action == "removed":
                        lines.append(f"{host.name}: removed {left.directory} (its pgrig died)")
                    elif left.action.startswith("left: another study's"):
                        others.append(f"{left.directory} on {host.name}")
            except PgrigError as exc:  # the run's own use of the host will say more
                lines.append(f"{host.name}: not cleaned: {exc}")
        return lines

    def left_beyond(self) -> bool:
        return bool(self._seen)  # a host's /tmp: seen by listing it only

    def describe(self, t: Target) -> dict[str, Any]:
        hosts = self.state(t)
        return {
            "kind": self.name,
            "host": hosts.server.name,
            "address": hosts.address,
            "load_hosts": [h.name for h in hosts.load],
            "where": f"remote host {hosts.server.name}",
        }

    def where(self, spec: TargetSpec) -> tuple[str, Path | None]:
        return self.options(spec).where(), None

    def probes_at(self, spec: TargetSpec) -> Path | None:
        # A directory ``storage`` makes on the host, its name known only then.
        return Path(f"{self.options(spec).host}:{TMP}/pgrig-server-*/probes")

    def label(self, t: Target) -> str:
        hosts = self.state(t)
        return f"host {hosts.server.name}"

    def load_hosts(self, spec: TargetSpec) -> int:
        # a target not checked (``pgrig plan``); a checked one's are its ``Checked``'s
        opts = self.options(spec)
        with contextlib.suppress(PgrigError):  # the check names what is wrong with it
            return max(1, len(inventory.load(opts.inventory).resolve(opts.load_hosts, "load host")))
        return max(1, len(opts.load_hosts))


def _hostlogs(stack: contextlib.ExitStack) -> Path:
    """A directory in /tmp here for the load hosts' logs, removed with ``stack``;
    with an owner record, as on a host: a kill -9 leaves it to `pgrig clean`."""
    here = LocalExecutor()
    made = owner.make(here, "hostlogs").path
    stack.callback(here.remove_tree, made)
    return Path(made)


def _clean_hostlogs(study: str | None, others: list[str]) -> list[str]:
    """What dead pgrig runs (of ``study``; None: any) left of ``_hostlogs`` here."""
    lines = []
    for left in owner.clean(LocalExecutor(), study=study, prefixes=(owner.HOSTLOGS,)):
        if left.action == "removed":
            lines.append(f"removed {left.directory} (its pgrig died)")
        elif left.action.startswith("left: another study's"):
            others.append(left.directory)
    return lines


def _tablespaces(t: Target, remote: HostedServer, ui: Ui) -> None:
    """Directories given as tablespaces become tablespaces of the server, in new
    directories below them on its host (``pgrig.targets.throwaway``'s, there)."""
    names: dict[str, str] = {}
    for option, name in (("tablespace", "pgrig_tables"), ("index_tablespace", "pgrig_indexes")):
        value = getattr(t.spec, option)
        if value and value.startswith("/"):
            names[option] = remote.create_tablespace(name, value)
            ui.ok(f"{t.name}: tablespace {name} in {value} on {remote.ex.name}")
    t.live.tablespaces = {
        "tablespace": names.get("tablespace", t.spec.tablespace),
        "index_tablespace": names.get("index_tablespace", t.spec.index_tablespace),
    }


KIND = RemoteKind()
