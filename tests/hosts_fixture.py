"""Test hosts: network namespaces on this machine, each running Debian's sshd.

Each host is a namespace ``pgrig-t-<pid>-<n>`` with one end of a veth pair;
the other ends hang on a bridge in the root namespace, so the hosts reach
each other and this machine over a real IP network (no traffic leaves the
machine). Each sshd listens only on its host's address, with a generated
host key, and accepts one generated ed25519 client key for ``root`` and for
``Lab.plain_user``, an account the lab adds without root or sudo (the
preflight's refusal; Debian's ``postgres`` account is locked, which sshd refuses
before any key is tried), and ``Lab.sudo_user``, one with passwordless sudo
(a file in /etc/sudoers.d, checked with visudo first) where sudo is installed.

The namespaces share this machine's filesystem and PIDs: a package
"installed" on one is installed on all; a path written over SSH is a path
here. Tests that rely on a host being separate say what they prove despite it.
A lab may give its hosts a directory of their own in place of a path
(``make_lab(binds=...)``): bound in their sshd's mount namespace, which ``ip
netns exec`` makes as a slave of this machine's, so the path here is untouched.

Everything is removed afterwards, also on failure: sshd by PID, the
namespaces, the veth pairs and the bridge, the accounts, the sudoers file,
the key directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
ADDRESS_BASE = "10.231"  # 10.231.<k>.0/24, k picked free per session


@dataclass(frozen=True)
class NetnsHost:
    name: str  # the inventory name
    netns: str
    address: str
    port: int
    sshd_pid: int


@dataclass
class Lab:
    """The namespaces of one test module, and what an inventory needs to reach them."""

    root: Path  # keys, sshd configs, inventories
    client_key: Path
    bridge_address: str
    plain_user: str
    sudo_user: str  # like plain_user, with passwordless sudo ("" where sudo is missing)
    hosts: list[NetnsHost] = field(default_factory=list)

    def inventory_ini(self, user: str = "root", extra: str = "") -> str:
        lines = ["[all]"]
        for h in self.hosts:
            lines.append(
                f"{h.name} ansible_host={h.address} ansible_port={h.port} "
                f"ansible_user={user} ansible_ssh_private_key_file={self.client_key}"
            )
        return "\n".join(lines) + "\n" + extra

    def write_inventory(self, user: str = "root", extra: str = "") -> Path:
        path = self.root / f"inventory-{user}.ini"
        path.write_text(self.inventory_ini(user, extra))
        return path

    def processes(self, comm: str, arg: str | None = None) -> dict[str, list[int]]:
        """The PIDs named ``comm`` in each host's namespace, by host name: this
        lab's own, never another test's on the same machine. With ``arg``, only
        those with it among their arguments (``pgbench`` with ``-T``: a measured
        run, not the ``pgbench --version`` pgrig runs on each load host at once)."""
        found: dict[str, list[int]] = {}
        for h in self.hosts:
            listed = _ip("netns", "pids", h.netns, check=False).stdout.split()
            for pid in listed:
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() != comm:
                        continue
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if arg is None or arg.encode() in argv:
                        found.setdefault(h.name, []).append(int(pid))
        return found


def owned_by(directory: Path, pid: int) -> bool:
    """Whether a directory pgrig made on a host names ``pid`` as its pgrig
    (its ``.pgrig-owner.json``): a test's own, not another test's on this machine."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        return bool(json.loads((directory / ".pgrig-owner.json").read_text())["pid"] == pid)
    return False


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def netns_available() -> str | None:
    """None when namespaces, veth and bridges can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if not SSHD.exists():
        return "no /usr/sbin/sshd: scripts/install-deps.sh test installs openssh-server"
    probe = f"pgrig-t-{os.getpid()}-probe"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"`ip netns add` failed: {done.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> str:
    used = _ip("-4", "-o", "addr").stdout
    for k in range(os.getpid() % 200, os.getpid() % 200 + 250):
        prefix = f"{ADDRESS_BASE}.{k % 250 + 1}"
        if f" {prefix}." not in used:
            return prefix
    raise RuntimeError("no free 10.231.x.0/24 subnet for the test hosts")


def _sshd_config(lab_root: Path, host_key: Path, authorized: Path, address: str, port: int) -> Path:
    path = lab_root / f"sshd-{address}.conf"
    path.write_text(
        "\n".join(
            [
                f"ListenAddress {address}:{port}",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized}",
                # The key directory is a temporary one, not a home directory.
                "StrictModes no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PermitRootLogin prohibit-password",
                f"PidFile {lab_root}/sshd-{address}.pid",
                "LogLevel ERROR",
                "MaxSessions 50",
                "MaxStartups 50",
                "Subsystem sftp internal-sftp",
                "",
            ]
        )
    )
    return path


def _root_rc_hidden() -> dict[str, Path]:
    """Root's ~/.bashrc hidden from the hosts' shells: /dev/null bound over it, one
    more of ``make_lab``'s binds. sshd runs each command as ``bash -c``, and bash
    reads ~/.bashrc when sshd starts it; this machine's runs pyenv's init (14 more
    processes and 0.1 s of CPU a command, 0.2-1.3 s of wall, and python3 becomes
    pyenv's shim, a bash script too): the ten test files with a lab took 439 s of
    CPU with it, 188 s without (docs/bench.md). A host's rc is its owner's
    business, not what these tests prove."""
    rc = Path(pwd.getpwnam("root").pw_dir) / ".bashrc"
    return {str(rc): Path(os.devnull)} if rc.is_file() else {}


def _wait_listening(
    netns: str, address: str, port: int, proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = log.read_text(errors="replace")
            raise RuntimeError(f"sshd in {netns} exited {proc.returncode}: {err}")
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd in {netns} does not listen on {address}:{port} after 15 s")


@dataclass
class _Made:
    """What the lab created, so teardown removes exactly that."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def _add_user(made: _Made, name: str) -> str:
    """An account with a shell and no password ("*": not locked, which sshd would refuse)."""
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/bin/sh", "-p", "*", name],
        check=True,
        capture_output=True,
        timeout=30,
    )
    made.users.append(name)
    return name


def _teardown(made: _Made, root: Path | None) -> None:
    for proc in made.procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
    for name in made.netns:
        # What still runs in a namespace this lab made is the lab's: an sshd
        # session whose client went with a cut link waits for it forever (14 such
        # sessions outlived their namespaces in session 17's runs).
        for pid in _ip("netns", "pids", name, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        _ip("netns", "del", name, check=False)
    for link in made.links:
        _ip("link", "del", link, check=False)
    for path in made.files:
        path.unlink(missing_ok=True)
    for user in made.users:
        subprocess.run(["userdel", user], capture_output=True, timeout=30, check=False)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


# Each (directory, path) pair after the script's name bound over the path, up to
# "--"; then the command, exec'd (its PID stays the one Popen gave).
# Run as the first command in the host's mount namespace (``ip netns exec`` makes
# one, a copy of this machine's mounts at that moment: / is private here, so
# nothing unmounted later reaches the copy). A loop-backed filesystem mounted
# then - another test's storage lab, another agent's - would stay mounted in the
# copy for as long as sshd lives, and its loop device could not be detached
# (ci45: two lab teardowns left /dev/loop0 and /dev/loop4 behind). So they are
# unmounted lazily in the copy (never on this machine), then ``make_lab``'s binds
# are made, then sshd runs.
_UNPIN_BIND_THEN_EXEC = (
    "for m in $(awk '$0 ~ / - [^ ]+ \\/dev\\/loop/ {print $5}' /proc/self/mountinfo | sort -r);"
    ' do umount -l -- "$m" 2>/dev/null; done;'
    ' while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; exec "$@"'
)


@contextlib.contextmanager
def make_lab(count: int, binds: Mapping[str, Path] | None = None) -> Iterator[Lab]:
    """``count`` SSH hosts in namespaces, named h1, h2, ...; all removed on the way
    out. ``binds``: a path each host sees as a directory of this machine's instead
    (``{"/usr/lib/locale": d}``: locales the hosts have and this machine lacks)."""
    made = _Made()
    root: Path | None = None
    tag = f"pgt{os.getpid() % 100000}"
    try:
        root = Path(tempfile.mkdtemp(prefix="pgrig-test-hosts-"))
        root.chmod(0o755)  # sshd reads authorized_keys as the plain user too
        client_key = root / "id_ed25519"
        host_key = root / "host_ed25519"
        for key in (client_key, host_key):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pgrig-test", "-f", str(key)],
                check=True,
                timeout=30,
            )
        authorized = root / "authorized_keys"
        authorized.write_text(client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o644)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir

        plain_user = _add_user(made, f"pgrigt{os.getpid()}")
        sudo_user = ""
        if shutil.which("visudo") is not None:
            sudo_user = _add_user(made, f"pgrigs{os.getpid()}")
            # Checked before it is put in place: a broken file would break sudo
            # for the whole machine.
            draft = root / "sudoers"
            draft.write_text(f"{sudo_user} ALL=(ALL) NOPASSWD: ALL\n")
            subprocess.run(["visudo", "-cqf", str(draft)], check=True, timeout=30)
            rule = Path(f"/etc/sudoers.d/pgrig-t-{os.getpid()}")
            made.files.append(rule)
            shutil.copyfile(draft, rule)
            rule.chmod(0o440)
        subnet = _free_subnet()
        bridge = f"{tag}br"
        _ip("link", "add", "name", bridge, "type", "bridge")
        made.links.append(bridge)
        _ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        lab = Lab(
            root=root,
            client_key=client_key,
            bridge_address=f"{subnet}.1",
            plain_user=plain_user,
            sudo_user=sudo_user,
        )
        for n in range(1, count + 1):
            netns = f"pgrig-t-{os.getpid()}-{n}"
            outer, inner = f"{tag}v{n}", f"{tag}p{n}"
            address = f"{subnet}.{n + 1}"
            _ip("netns", "add", netns)
            made.netns.append(netns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            made.links.append(outer)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            _ip("link", "set", inner, "netns", netns)
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", inner)
            _ip("-n", netns, "link", "set", inner, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            config = _sshd_config(root, host_key, authorized, address, 22)
            log = root / f"sshd-{address}.log"
            with log.open("wb") as log_fh:
                bind_here = {**_root_rc_hidden(), **(binds or {})}
                bound = [
                    "sh", "-c", _UNPIN_BIND_THEN_EXEC, "sh",
                    *(arg for path, there in bind_here.items() for arg in (there, path)),
                    "--",
                ]  # fmt: skip
                sshd = [str(SSHD), "-D", "-e", "-f", str(config)]
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", netns, *bound, *sshd],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log_fh,
                )
            made.procs.append(proc)
            _wait_listening(netns, address, 22, proc, log)
            lab.hosts.append(NetnsHost(f"h{n}", netns, address, 22, proc.pid))
        yield lab
    finally:
        _teardown(made, root)


@pytest.fixture(scope="module")
def netns_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    """Three SSH hosts in namespaces (``h1``, ``h2``, ``h3``); a module may ask
    for another count with ``pytestmark = pytest.mark.netns_hosts(n)``."""
    why = netns_available()
    if why is not None:
        pytest.skip(why)
    marker = request.node.get_closest_marker("netns_hosts")
    with make_lab(marker.args[0] if marker else 3) as lab:
        yield lab
