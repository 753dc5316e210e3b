"""What a remote target refuses over its hosts before anything exists (issue 32):
workloads it cannot run yet, clients that every load host opens against the
server's max_connections, and two servers on one host and port (the check asks
them phase by phase: ``unsupported``, ``before_hosts``, then the host's own).
Issue 40 (13): a ``directory`` here that
cannot be made, a server on loopback for load hosts elsewhere, one machine
named twice among the load hosts (all of which need no host); the host's own
refusals (a port something listens on, a read-only ``wal_directory`` or
tablespace directory) once it is reached. (The kind's keys are refused where
they are read: ``remote.RemoteKind.parse``.)"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pgrig import registry
from pgrig.cluster import profiles, workdir
from pgrig.errors import PgrigError, UsageError, WorkdirError
from pgrig.hosts import owner
from pgrig.hosts.executor import Executor
from pgrig.hosts.inventory import Host
from pgrig.targets.throwaway import connections_fit

if TYPE_CHECKING:
    from pgrig.registry.target import Demands, TargetSpec


def every_load_host(demands: Demands, load: Sequence[Host]) -> Demands:
    """The study's demands with the clients of every load host: each opens the
    run's clients (two hosts of 60 are 120 connections; that passed, then failed
    with "too many clients already"). What the server's max_connections is held to."""
    if len(load) < 2:
        return demands
    of = f"{demands.clients_of} from {len(load)} load hosts"
    return replace(demands, clients=demands.clients * len(load), clients_of=of)


def server_loads(
    target: str, server: Host, load: Sequence[Host], named: Sequence[str]
) -> list[str]:
    """A load host named that is the server's own host is allowed, and said (the
    default, no ``load_hosts``, is silent)."""
    if not named or server not in load:
        return []
    return [
        f"target {target}: load host {server.name} is the server's own host:"
        " its pgbench shares the server's CPUs"
    ]


@dataclass(frozen=True)
class Placed:
    """Where a checked remote target's server listens and its load comes from:
    what targets are refused or told over one another (``check_together``)."""

    target: str
    server: Host
    address: str  # the server host's IP address
    port: int
    load: tuple[Host, ...]


def shared_ports(placed: Sequence[Placed]) -> None:
    """Two servers on one address and port cannot both listen (it failed at
    bind time, a truncated 'ddress already in use')."""
    seen: dict[tuple[str, int], str] = {}
    for p in placed:
        if (other := seen.setdefault((p.address, p.port), p.target)) != p.target:
            raise UsageError(
                f"targets {other} and {p.target} both put their server on {p.server.name} "
                f"port {p.port}: the second could not listen",
                hint=f"give target {p.target} a port of its own (port = {p.port + 1})",
            )


def unsupported(spec: TargetSpec, demands: Demands) -> None:
    """Workloads a server on a host cannot run yet: a power cut (the lossy
    filesystem is this machine's), and those that run neither from load hosts
    nor from here."""
    if demands.power_loss:
        raise UsageError(
            f"target {spec.name}: workload {demands.power_loss} is not supported on a "
            "remote host yet",
            hint="run it on a local target",
        )
    able = [name for name, w in registry.workloads().items() if w.from_load_hosts or w.from_here]
    others = [w for w in demands.workloads if w not in able]
    if others:
        raise UsageError(
            f"target {spec.name}: workload type {others[0]} cannot run from load hosts "
            f"yet (only {', '.join(able)})",
            hint="run it on a local target, or drop it from this campaign",
        )


def before_hosts(
    spec: TargetSpec,
    clients: Demands,
    origin: str,
    server: Host,
    load: Sequence[Host],
    notes: list[str],
) -> None:
    """What needs no host reached (a 999-host inventory was contacted for 464 s,
    then refused on max_connections: issue 40.14): where the server's host is
    among the load hosts, the directory made here, and the clients of every load
    host (``every_load_host``) against any host's max_connections (the target's
    ``set`` written at ``origin``)."""
    reachable_server(spec, server, load)
    one_machine_once(spec, load, notes)
    log_directory(spec)
    fits_any_host(spec, clients, origin)


# The largest machine a profile is rendered for before any host is reached: a
# profile's max_connections that grows with RAM or CPUs is at its highest there.
_ANY_HOST = profiles.Machine(ram_bytes=2**40, cpus=256)


def fits_any_host(spec: TargetSpec, clients: Demands, origin: str) -> None:
    """Clients beyond the most connections the profile gives any host, refused
    without contacting one. The profile is only read here: validated once, for
    the server's host (``remote._profile``)."""
    rough = profiles.load(spec.profile, machine=_ANY_HOST).with_overrides(spec.settings, origin)
    connections_fit(spec, rough, clients)


def log_directory(spec: TargetSpec) -> None:
    """``directory`` of a remote target is made here (the load hosts' logs):
    refused now when it cannot be (issue 40.13: /proc/... tracebacked in
    ``_log_root`` after the study existed)."""
    if spec.directory is None:
        return
    existing = next(p for p in (spec.directory, *spec.directory.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise WorkdirError(
            f"target {spec.name}: directory {spec.directory} cannot be made: {existing} is a file",
            hint="directory is where the load hosts' logs are kept on this machine: "
            "give a directory you can write to",
        )
    workdir.check_target(
        existing,
        what=f"target {spec.name}: directory {spec.directory} (where the load hosts' logs "
        "are kept, on this machine) cannot be made:",
        option="directory",
    )


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def reachable_server(spec: TargetSpec, server: Host, load: Sequence[Host]) -> None:
    """A server on this machine's loopback (``ansible_connection=local``) listens
    where no other host can reach it."""
    far = [h.name for h in load if not h.local]
    if _loopback(server.address) and far:
        raise UsageError(
            f"target {spec.name}: the server's host {server.name} is {server.address} "
            f"(loopback): load host {far[0]} could not reach it",
            hint=f"give {server.name} this machine's network address: ansible_host=... at "
            f"{server.where}",
        )


def one_machine_once(spec: TargetSpec, load: Sequence[Host], notes: list[str]) -> None:
    """Load hosts that reach one sshd (one address and port) are one machine:
    their pgbench would share its CPUs while the report counts them as hosts
    (issue 40.13-14: 999 names of one address, 2,000 sshd processes on it).
    Refused over SSH; this machine's names (``ansible_connection=local``) are
    said, as tests run several pgbench here on purpose."""
    by_place: dict[tuple[str, int] | None, list[Host]] = {}
    for h in load:
        by_place.setdefault(None if h.local else (h.address, h.port), []).append(h)
    for place, hosts in by_place.items():
        if len(hosts) < 2:
            continue
        names = ", ".join(h.name for h in hosts[:4]) + (
            f", ... ({len(hosts)} hosts)" if len(hosts) > 4 else ""
        )
        if place is None:
            notes.append(
                f"target {spec.name}: load hosts {names} are all this machine "
                "(ansible_connection=local): their pgbench share its CPUs"
            )
            continue
        raise UsageError(
            f"target {spec.name}: load hosts {names} are one machine ({place[0]} port "
            f"{place[1]}): their pgbench would share its CPUs while the report counted "
            f"{len(hosts)} hosts",
            hint="name each machine once in load_hosts, or give each its own ansible_host "
            f"(at {hosts[1].where})",
        )


def port_free(spec: TargetSpec, ex: Executor, server: Host, address: str, port: int) -> None:
    """The server's port on its host: sshd's, or one something listens on already
    (issue 40.13: port = 22 failed after the study was created). A server a dead
    pgrig left is not refused: the run stops it first (``pgrig.hosts.owner``)."""
    if port == server.port and not server.local:
        raise UsageError(
            f"target {spec.name}: port {port} on {server.name} is its SSH port "
            f"(ansible_port): the server could not listen there",
            hint="leave port out (5432), or give another free port",
        )
    try:  # a connect is a read: it changes nothing on the host
        with socket.create_connection((address, port), timeout=3):
            taken = True
    except OSError:
        taken = False
    if taken and not _left_by_dead_pgrig(ex, port):
        raise UsageError(
            f"target {spec.name}: something already listens on {server.name} "
            f"{address}:{port}: the server could not listen there",
            hint=f"give the target another port (port = {port + 1}), or stop what listens "
            f"(a kept pgrig server: pgrig clean --inventory ...)",
        )


def _left_by_dead_pgrig(ex: Executor, port: int) -> bool:
    """Whether a server a dead pgrig left on the host listens on ``port`` (its
    postmaster.pid's fourth line): the run's clean stops it before the server starts."""
    for left in owner.clean(ex, dry_run=True):
        if left.owner is None or left.owner.kind != "server" or left.owner.alive():
            continue
        try:
            lines = ex.read_text(f"{left.directory}/data/postmaster.pid").splitlines()
        except (OSError, PgrigError):  # gone meanwhile, or never started
            continue
        if len(lines) > 3 and lines[3].strip() == str(port):
            return True
    return False


def host_directories(spec: TargetSpec, ex: Executor) -> None:
    """``wal_directory`` and tablespace directories are the server's host's: each
    must be a directory there that root can write in (a real write: a read-only
    mount failed at initdb, exit 1, after the study and its report existed)."""
    given = [("wal_directory", str(spec.wal_directory) if spec.wal_directory else None)]
    given += [(k, getattr(spec, k)) for k in ("tablespace", "index_tablespace")]
    for key, path in given:
        if not path or not path.startswith("/"):
            continue  # a tablespace's name: no_named_tablespace refused it already
        if not ex.run(["test", "-d", path], timeout=30, check=False, what="test").ok:
            raise UsageError(
                f"target {spec.name}: {key} {path} is not a directory on {ex.name}",
                hint=f"create it on {ex.name} (on the disk to test), or fix {key}",
            )
        probe = ex.run(
            ["mktemp", "-d", "-p", path, ".pgrig-write-test-XXXXXX"],
            timeout=30, check=False, what="mktemp",
        )  # fmt: skip
        if not probe.ok:
            why = (probe.stderr.strip().splitlines() or ["not writable"])[-1]
            raise WorkdirError(
                f"target {spec.name}: {key} {path} on {ex.name} is not writable ({why})",
                hint=f"make {path} writable on {ex.name} (a read-only mount?), or point "
                f"{key} elsewhere",
            )
        ex.run(["rmdir", "--", probe.stdout.strip()], timeout=30, check=False, what="rmdir")


def servers_of_others(placed: Sequence[Placed], notes: list[str]) -> None:
    """A load host that is another target's server host: that server lives for the
    whole study (targets are interleaved), beside this target's pgbench."""
    for p in placed:
        for other in placed:
            for h in p.load:
                if other.target != p.target and (h.address, h.port) == (
                    other.server.address,
                    other.server.port,
                ):
                    notes.append(
                        f"target {p.target}: load host {h.name} is target {other.target}'s "
                        f"server host ({other.server.name}): that server stays up for the "
                        f"whole study, so {p.target}'s pgbench shares the host with it"
                    )
