"""What a remote target refuses over its hosts before anything exists (issue 32):
clients that every load host opens against the server's max_connections, and
two servers on one host and port, and a ``load_hosts`` key that names none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pgrig.errors import UsageError
from pgrig.hosts.inventory import Host
from pgrig.schema import Table as Keys
from pgrig.targets.throwaway import connections_fit

if TYPE_CHECKING:
    from pgrig.cluster import profiles
    from pgrig.registry.target import Demands, TargetSpec


def load_fits(
    spec: TargetSpec, profile: profiles.Profile, demands: Demands, load: Sequence[Host]
) -> None:
    """Every load host opens the run's clients (two hosts of 60 are 120
    connections; that passed, then failed with "too many clients already")."""
    if len(load) > 1:
        of = f"{demands.clients_of} from {len(load)} load hosts"
        demands = replace(demands, clients=demands.clients * len(load), clients_of=of)
    connections_fit(spec, profile, demands)


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


def shared_ports(servers: Sequence[tuple[str, str, str, int]]) -> None:
    """(target, host, address, port) of each server: two on one address and port
    cannot both listen (it failed at bind time, a truncated 'ddress already in use')."""
    seen: dict[tuple[str, int], str] = {}
    for name, host, address, port in servers:
        if (other := seen.setdefault((address, port), name)) != name:
            raise UsageError(
                f"targets {other} and {name} both put their server on {host} port {port}:"
                " the second could not listen",
                hint=f"give target {name} a port of its own (port = {port + 1})",
            )


def load_hosts_key(t: Keys, key: str, default: object) -> tuple[str, ...]:
    value = t.get(key, (str, list), None)
    if value is None:
        return ()  # pgbench on the server's own host, as seed 000 ran it
    names = (value,) if isinstance(value, str) else tuple(value or ())
    if not names or not all(isinstance(n, str) and n for n in names):
        raise t.error(
            key,
            "load_hosts names the inventory hosts pgbench runs on",
            hint='load_hosts = ["c1", "c2"], or a group: load_hosts = "load"; '
            "leave it out to run pgbench on the server's host",
        )
    return names
