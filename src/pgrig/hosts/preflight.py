"""Preflight: every host reachable, its key accepted, root or passwordless sudo
at hand - all checked, and every failure named, before anything is created."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import click

from pgrig import proc
from pgrig.errors import HostUnusable, PgrigError
from pgrig.hosts.executor import Executor
from pgrig.hosts.inventory import Host
from pgrig.hosts.local import LocalExecutor
from pgrig.hosts.ssh import SshConnectError, SshExecutor


@dataclass(frozen=True)
class Access:
    """How pgrig acts as root on a host."""

    host: str
    user: str
    sudo: bool  # False: the user is root


def _fix(host: Host, kind: str) -> str:
    if kind == "unreachable":
        return (
            f"check that {host.address}:{host.port} is the host's address and sshd port "
            f"(ansible_host, ansible_port at {host.where}) and that sshd runs there"
        )
    if kind == "keyfile":
        return f"ansible_ssh_private_key_file at {host.where} must name a readable private key"
    if kind == "key":
        key = host.key_file or "your ssh agent's or ~/.ssh's keys"
        return (
            f"add the public half of {key} to ~{host.user or ''}/.ssh/authorized_keys on "
            f"{host.name}, or set ansible_user / ansible_ssh_private_key_file at {host.where}"
        )
    return f"try `ssh -p {host.port} {host.user or ''}@{host.address}` by hand"


def connect(host: Host) -> Executor:
    """An executor for ``host``, or HostUnusable naming the host and the fix."""
    if host.local:
        return LocalExecutor(host)
    if host.key_file is not None and not host.key_file.is_file():
        raise HostUnusable(
            f"host {host.name}: the key {host.key_file} does not exist",
            hint=_fix(host, "keyfile"),
        )
    try:
        return SshExecutor.connect(host)
    except SshConnectError as exc:
        what = {
            "unreachable": "cannot be reached",
            "key": "refused the key",
            "keyfile": "has a key pgrig cannot read",
        }.get(exc.kind, "refused the SSH connection")
        raise HostUnusable(
            f"host {host.describe()} {what}: {exc.detail}", hint=_fix(host, exc.kind)
        ) from None
    except PgrigError as exc:  # a timeout of the whole connect
        raise HostUnusable(f"host {host.describe()} cannot be reached: {exc}") from None


def root_access(ex: Executor) -> Access:
    """Root, or passwordless sudo; else HostUnusable. pgrig creates users,
    directories and servers on a host, which needs one of them."""
    who = ex.whoami()
    if who.root:
        return Access(ex.name, who.user, sudo=False)
    if ex.host.become is False:  # issue 40.15: sudo was used anyway
        raise HostUnusable(
            f"host {ex.host.describe()}: user {who.user} is not root and ansible_become is "
            "false: pgrig creates users, directories and servers there, as root",
            hint=f"set ansible_user=root, or ansible_become=true at {ex.host.where} (with "
            f"passwordless sudo for {who.user})",
        )
    if who.sudo == 0:  # the executor acts through sudo from its connection on
        return Access(ex.name, who.user, sudo=True)
    reason = "sudo is not installed" if who.sudo == 127 else "sudo asks for a password"
    raise HostUnusable(
        f"host {ex.host.describe()}: user {who.user} is not root and cannot use sudo ({reason})",
        hint=f"set ansible_user=root at {ex.host.where}, or give {who.user} passwordless sudo "
        f"(a line '{who.user} ALL=(ALL) NOPASSWD: ALL' in /etc/sudoers.d/)",
    )


Reached = tuple[Executor, Access]
# Hosts reached (and asked) at once: each SSH session is two sshd processes on
# its host, and many names may be one machine.
AT_ONCE = 16


def reach_all(hosts: Sequence[Host]) -> list[Reached | HostUnusable]:
    """Connect to every host at once and check root on each: per host, in the
    order given, its executor and access, or why it cannot be used."""

    def one(host: Host) -> Reached:
        ex = connect(host)
        try:
            return ex, root_access(ex)
        except BaseException:
            ex.close()
            raise

    results: list[Reached | HostUnusable] = []
    progress = _Progress(len(hosts))
    with proc.ContextPool(max_workers=max(1, min(AT_ONCE, len(hosts)))) as pool:
        for future in [pool.submit(one, h) for h in hosts]:
            try:
                results.append(future.result())
            except HostUnusable as exc:
                results.append(exc)
            progress.done(len(results))
    return results


class _Progress:
    """More hosts than are reached at once: how many so far, on stderr every few
    seconds (a 999-host inventory said nothing for 464 s: issue 40.14)."""

    EVERY_S = 3.0

    def __init__(self, total: int) -> None:
        self.total = total
        self.last = time.monotonic()

    def done(self, count: int) -> None:
        if self.total <= AT_ONCE:
            return
        now = time.monotonic()
        if now - self.last >= self.EVERY_S or count == self.total:
            self.last = now
            click.echo(f"reached {count} of {self.total} hosts ({AT_ONCE} at a time)", err=True)


def refusal(failed: Sequence[HostUnusable]) -> HostUnusable:
    """One error naming every host that failed, each with its fix."""
    if len(failed) == 1:
        return failed[0]
    return HostUnusable(
        f"{len(failed)} hosts cannot be used: " + "; ".join(f.message for f in failed),
        hint=" / ".join(f.hint for f in failed if f.hint),
    )


def check_all(hosts: Sequence[Host]) -> tuple[list[Executor], list[Access]]:
    """Connect to every host at once and check root on each; on any failure close
    what was opened and raise one error naming every host that failed."""
    results = reach_all(hosts)
    failed = [r for r in results if isinstance(r, HostUnusable)]
    ok = [r for r in results if not isinstance(r, HostUnusable)]
    if failed:
        for ex, _ in ok:
            ex.close()
        raise refusal(failed)
    return [ex for ex, _ in ok], [a for _, a in ok]


@contextlib.contextmanager
def opened(hosts: Sequence[Host]) -> Iterator[list[Executor]]:
    """Executors for ``hosts`` after the preflight; closed on the way out."""
    executors, _ = check_all(hosts)
    try:
        yield executors
    finally:
        for ex in executors:
            ex.close()


class Pool:
    """Hosts reached and checked once per study (issue 29): a study's check, its
    cleaning and its storage ask for the same hosts; each is connected to and
    root-checked the first time only, and later asks get that executor."""

    def __init__(self) -> None:
        self._idle: dict[str, Executor] = {}  # by host name: reached, not claimed
        self._claims = 0
        self._lock = threading.Lock()

    def get(self, hosts: Sequence[Host]) -> list[Executor]:
        """Executors for ``hosts``, in order, left in the pool: the hosts not reached
        before are reached now, at once (every failure named, ``check_all``)."""
        with self._lock:
            missing = [h for h in hosts if h.name not in self._idle]
            if missing:
                executors, _ = check_all(missing)
                self._idle.update({ex.name: ex for ex in executors})
            return [self._idle[h.name] for h in hosts]

    @contextlib.contextmanager
    def claimed(self, hosts: Sequence[Host]) -> Iterator[list[Executor]]:
        """Executors for ``hosts`` for the ``with`` block alone, taken out of the
        pool (a target's storage sets its own state on them: two targets on one
        host get a connection each) and closed on the way out. When the last
        claim ends the study is over: what is left idle is closed too."""
        with self._lock:
            mine = {h.name: self._idle.pop(h.name) for h in hosts if h.name in self._idle}
            self._claims += 1
        try:
            fresh = [h for h in hosts if h.name not in mine]
            if fresh:
                executors, _ = check_all(fresh)
                mine.update({ex.name: ex for ex in executors})
            yield [mine[h.name] for h in hosts]
        finally:
            for ex in mine.values():
                ex.close()
            with self._lock:
                self._claims -= 1
                last = self._claims == 0
            if last:
                self.close()

    def close(self) -> None:
        """Close every idle executor (a refused check: the study does not run)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for ex in idle:
            ex.close()
