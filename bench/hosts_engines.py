#!/usr/bin/env python3
"""pyinfra or ansible-runner for provisioning hosts? (issue 17, part 4)

Both engines, each in a fresh venv of its own (install time, size and package
count measured here), run the same idempotent deploy - "PostgreSQL 15 (which
holds pgbench) and fio are present" - against one SSH host in a network
namespace (tests/hosts_fixture.py), in alternating order, ``--rounds`` times.
The namespace shares this machine's filesystem, so the packages are already
there: what is timed is an engine's fixed cost - connect, gather facts, decide
"nothing to do" - which is what every later provisioning of a ready host costs.

    .venv/bin/python bench/hosts_engines.py [--rounds 3] [--venvs /tmp/engines]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hosts_fixture import Lab, make_lab, netns_available  # noqa: E402

PACKAGES = ["postgresql-15", "fio"]
ENGINES = {"pyinfra": ["pyinfra"], "ansible-runner": ["ansible-runner", "ansible-core"]}


def install(venvs: Path, engine: str) -> tuple[float, int, int]:
    """(seconds, MiB of site-packages, packages) for a fresh venv of ``engine``."""
    venv = venvs / engine
    if not (venv / "bin" / "pip").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    start = time.monotonic()
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", *ENGINES[engine]],
        check=True,
        timeout=900,
    )
    seconds = time.monotonic() - start
    du = subprocess.run(["du", "-sm", str(venv / "lib")], capture_output=True, text=True)
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True, text=True
    )
    return seconds, int(du.stdout.split()[0]), len(listed.stdout.splitlines())


def pyinfra_run(venv: Path, lab: Lab, work: Path) -> subprocess.CompletedProcess[str]:
    host = lab.hosts[0]
    (work / "inventory.py").write_text(
        f"hosts = [({host.address!r}, {{'ssh_user': 'root', 'ssh_port': {host.port}, "
        f"'ssh_key': {str(lab.client_key)!r}, 'ssh_known_hosts_file': '/dev/null', "
        "'ssh_strict_host_key_checking': 'no'})]\n"
    )
    (work / "deploy.py").write_text(
        "from pyinfra.operations import apt\n"
        f"apt.packages(name='PostgreSQL 15 and fio', packages={PACKAGES!r})\n"
    )
    argv = [str(venv / "bin" / "pyinfra"), "-y", "inventory.py", "deploy.py"]
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=600)


def ansible_run(venv: Path, lab: Lab, work: Path) -> subprocess.CompletedProcess[str]:
    (work / "inventory").mkdir(exist_ok=True)
    (work / "project").mkdir(exist_ok=True)
    # The interpreter named: discovery finds this machine's pyenv shims first.
    (work / "inventory" / "hosts").write_text(
        lab.inventory_ini().replace("[all]", "[bench]")
        + "[bench:vars]\nansible_python_interpreter=/usr/bin/python3\n"
    )
    (work / "project" / "ensure.yml").write_text(
        "- hosts: bench\n  gather_facts: false\n  tasks:\n"
        "    - name: PostgreSQL 15 and fio\n"
        f"      ansible.builtin.apt: {{name: {PACKAGES}, state: present}}\n"
    )
    env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "False", "PATH": f"{venv}/bin:/usr/bin:/bin"}
    argv = [str(venv / "bin" / "ansible-runner"), "run", str(work), "-p", "ensure.yml"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


RUNS = {"pyinfra": pyinfra_run, "ansible-runner": ansible_run}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--venvs", type=Path, default=None, help="reuse engine venvs kept here")
    args = ap.parse_args()
    if why := netns_available():
        print(f"cannot run: {why}", file=sys.stderr)
        return 3
    if args.venvs is None:
        with tempfile.TemporaryDirectory(prefix="pgrig-bench-engines-") as tmp:
            return measure(Path(tmp), args.rounds)
    return measure(args.venvs, args.rounds)


def measure(venvs: Path, rounds: int) -> int:
    for engine in ENGINES:
        seconds, mib, count = install(venvs, engine)
        print(f"install {engine}: {seconds:.1f} s, {mib} MiB, {count} packages", flush=True)
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    with make_lab(1) as lab:
        for r in range(rounds):
            order = list(ENGINES) if r % 2 == 0 else list(reversed(ENGINES))
            for engine in order:
                with tempfile.TemporaryDirectory(prefix=f"pgrig-bench-{engine}-") as tmp:
                    start = time.monotonic()
                    done = RUNS[engine](venvs / engine, lab, Path(tmp))
                    elapsed = time.monotonic() - start
                if done.returncode != 0:
                    print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
                    return 1
                times[engine].append(elapsed)
                print(f"round {r + 1} {engine}: {elapsed:.2f} s", flush=True)
    for engine, values in times.items():
        print(
            f"{engine}: median {statistics.median(values):.2f} s "
            f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
