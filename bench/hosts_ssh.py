#!/usr/bin/env python3
"""asyncssh or the system ssh with ControlMaster, for the SSH executor? (issue 17, part 3)

Against one SSH host in a network namespace (tests/hosts_fixture.py), in
alternating order each round:

* asyncssh: ``SshExecutor.run(["true"])`` - a new channel on one connection;
* ssh-mux:  ``ssh -o ControlPath=... true`` through a ControlMaster started
  once - a new ssh process per command, multiplexed on one connection;
* read:     reading /proc/stat through asyncssh's SFTP, against ``ssh-mux cat``.

    .venv/bin/python bench/hosts_ssh.py [--rounds 5] [--calls 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hosts_fixture import make_lab, netns_available  # noqa: E402
from pgrig.hosts import inventory, preflight  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument(
        "--plain",
        action="store_true",
        help="as the lab's plain user (login shell /bin/sh): no ~/.bashrc in each command",
    )
    args = ap.parse_args()
    if why := netns_available():
        print(f"cannot run: {why}", file=sys.stderr)
        return 3
    ms: dict[str, list[float]] = {
        "asyncssh run": [],
        "ssh-mux run": [],
        "sftp read": [],
        "ssh-mux cat": [],
    }
    with make_lab(1) as lab, tempfile.TemporaryDirectory() as tmp:
        host = lab.hosts[0]
        user = lab.plain_user if args.plain else "root"
        ssh = [
            "ssh",
            "-i",
            str(lab.client_key),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            f"ControlPath={tmp}/mux",
            "-p",
            str(host.port),
            f"{user}@{host.address}",
        ]
        master = subprocess.Popen([*ssh[:-1], "-M", "-N", "-o", "ControlPersist=no", ssh[-1]])
        try:
            time.sleep(1.0)
            (h,) = inventory.load(lab.write_inventory(user)).hosts.values()
            # Not preflight.opened: the plain user has no root, which is the point here.
            ex = preflight.connect(h)
            try:
                runs = {
                    "asyncssh run": lambda: ex.run(["true"], timeout=30),
                    "ssh-mux run": lambda: subprocess.run([*ssh, "true"], check=True, timeout=30),
                    "sftp read": lambda: ex.read_text("/proc/stat"),
                    "ssh-mux cat": lambda: subprocess.run(
                        [*ssh, "cat", "/proc/stat"], check=True, timeout=30, capture_output=True
                    ),
                }
                for r in range(args.rounds):
                    order = list(runs) if r % 2 == 0 else list(reversed(runs))
                    for name in order:
                        start = time.perf_counter()
                        for _ in range(args.calls):
                            runs[name]()
                        ms[name].append((time.perf_counter() - start) / args.calls * 1000)
            finally:
                ex.close()
        finally:
            master.terminate()
            master.wait(10)
    for name, values in ms.items():
        print(
            f"{name}: median {statistics.median(values):.2f} ms per call "
            f"(min {min(values):.2f}, max {max(values):.2f}; {args.rounds} rounds of {args.calls})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
