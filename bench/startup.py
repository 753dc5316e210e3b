#!/usr/bin/env python3
"""What a pgrig process costs before it does its work: the CPU (user + sys) of
the commands the tests start as subprocesses, on this checkout and on another
(``--src``), run alternately so that the machine's load falls on both alike.

Each command runs ``--repeat`` times on each tree, the two trees taking turns
(A B, then B A, ...); the CPU of a run is what ``getrusage(RUSAGE_CHILDREN)``
gained while it ran, so the tools a command starts itself (``plan`` asks each
target's binaries their version) are in it, as they are in the suite's. Both
trees' bytecode is compiled first: the suite does the same (tests/conftest.py),
as PYTHONDONTWRITEBYTECODE is set on this machine.

Printed per command: the median CPU of each tree with its spread (min-max),
the ratio of the medians (``--src`` over this checkout's: over 1 is a saving),
and the spread of the per-pair ratios (each run of A against the B next to it).

The commands, each as a test starts it (tests/: about 150 starts of ``python
-m pgrig`` in a suite, most of them ``run``; bench/startup.py --list shows them):

help        ``pgrig --help`` (tests/test_cli_speed.py's own)
refused     ``pgrig run --target DIR --pg-bin /nonexistent``: bad input refused
            before anything is made (test_cli, test_bad_input's kind)
plan        ``pgrig plan CAMPAIGN``: two directory targets, TPC-B (test_campaign's GOOD)
list        ``pgrig list --results R`` of a store holding one study
report      ``pgrig report STUDY --results R``: the report of a stored study
            (tests/data/report/quick_study.json.gz), Markdown and HTML written
plugins     ``pgrig plugins``: every plug-in loaded and listed
run         ``pgrig run`` of test_cli.py's TINY study (initdb, scale 1, one 2-s
            select-only run, report): the servers and pgbench included; only
            with ``--run`` (10 s a run, and its CPU is mostly PostgreSQL's)

Usage (from the repository root):

    .venv/bin/python bench/startup.py --src /tmp/main/src [--repeat 5] [--only refused,plan]

``--src`` names another tree's ``src/`` (``git archive main src pyproject.toml |
tar -x -C /tmp/main``); its pyproject's entry points are put first on the path,
as bench/routes.py does.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from routes import entry_points_first, stored

HERE = Path(__file__).resolve().parent.parent

CAMPAIGN = """\
[campaign]
name = "two-disks"
baseline = "disk-a"
repeat = 2
warmup = 0
reset = "restore"

[[target]]
name = "disk-a"
directory = "{a}"
profile = "stock"
[target.set]
fsync = false
shared_buffers = "64MB"

[[target]]
name = "disk-b"
directory = "{b}"
profile = "stock"
[target.set]
fsync = false
shared_buffers = "64MB"

[probes]
timing = 1
fsync = false
fio = false

[[workload]]
type = "tpcb"
scales = [1]
modes = ["select-only", "read-write"]
clients = [1, 2]
duration = 3
count = false
"""

# tests/test_cli.py's TINY: the smallest study that runs every TPC-B step for real.
TINY = [
    "--skip", "fsync,fio", "--timing-seconds", "1", "--scale", "1", "--clients", "1",
    "--duration", "2", "--modes", "select-only", "--no-count", "--repeat", "1",
    "--profile", "stock", "--set", "fsync=off",
]  # fmt: skip


@dataclass(frozen=True)
class Scratch:
    """The files the commands read, made once for both trees."""

    root: Path
    campaign: Path
    results: Path  # a store holding one study
    study: str

    def argv(self, name: str, run_dir: Path) -> list[str]:
        return {
            "help": ["--help"],
            "refused": ["run", "--target", str(self.root), "--results", str(run_dir / "r"),
                        "--pg-bin", "/nonexistent"],
            "plan": ["plan", str(self.campaign)],
            "list": ["list", "--results", str(self.results)],
            "report": ["report", self.study, "--results", str(self.results)],
            "plugins": ["plugins"],
            "run": ["run", "--target", str(run_dir), "--results", str(run_dir / "r"), *TINY],
        }[name]  # fmt: skip


COMMANDS = ("help", "refused", "plan", "list", "report", "plugins", "run")
EXIT = {"refused": 3}  # the exit code a command must give (else 0)


def make_scratch(root: Path) -> Scratch:
    disks = root / "a", root / "b"
    for d in disks:
        d.mkdir(parents=True)
    campaign = root / "c.toml"
    campaign.write_text(CAMPAIGN.format(a=disks[0], b=disks[1]))
    results = root / "store"
    results.mkdir()
    study = stored("quick", results)
    return Scratch(root, campaign, results, study)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one(argv: list[str], env: dict[str, str], cwd: Path, want: int) -> float:
    """The CPU seconds of one ``python -m pgrig ARGV`` (its children included)."""
    before = children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", *argv],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    took = children_cpu() - before
    if done.returncode != want:
        said = done.stderr[-2000:]
        sys.exit(f"pgrig {' '.join(argv)}: exit {done.returncode}, not {want}\n{said}")
    return took


def tree_env(src: Path, meta_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    meta = entry_points_first(src, meta_root)
    env["PYTHONPATH"] = os.pathsep.join([str(meta), str(src)])
    env["NO_COLOR"] = "1"
    return env


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, required=True, help="the other tree's src/")
    p.add_argument("--repeat", type=int, default=5, help="runs of each command on each tree")
    p.add_argument("--only", default="", help="commands, comma-separated (default: all but run)")
    p.add_argument("--run", action="store_true", help="also the TINY study (pgrig run)")
    p.add_argument("--list", action="store_true", help="print each command's argv and stop")
    args = p.parse_args()
    names = [n for n in args.only.split(",") if n] or [
        n for n in COMMANDS if n != "run" or args.run
    ]
    unknown = sorted(set(names) - set(COMMANDS))
    if unknown:
        p.error(f"unknown command {', '.join(unknown)}: one of {', '.join(COMMANDS)}")
    trees = {"this": HERE / "src", "other": args.src.resolve()}
    for src in trees.values():
        if not (src / "pgrig" / "__init__.py").is_file():
            p.error(f"{src}: no pgrig package there (--src names a tree's src/)")
        compileall.compile_dir(src / "pgrig", quiet=1)

    with tempfile.TemporaryDirectory(prefix="pgrig-startup-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # the servers run as postgres: they pass through it
        scratch = make_scratch(root / "scratch")
        if args.list:
            for name in names:
                print(f"{name:8s} pgrig {' '.join(scratch.argv(name, root / 'run'))}")
            return 0
        envs = {t: tree_env(src, root / f"meta-{t}") for t, src in trees.items()}
        cpu: dict[tuple[str, str], list[float]] = {}
        for i in range(args.repeat):
            for name in names:
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for tree in order:
                    run_dir = Path(tempfile.mkdtemp(dir=root, prefix=f"{name}-"))
                    run_dir.chmod(0o755)
                    argv = scratch.argv(name, run_dir)
                    took = one(argv, envs[tree], root, EXIT.get(name, 0))
                    cpu.setdefault((name, tree), []).append(took)
            print(f"round {i + 1}/{args.repeat} done", file=sys.stderr)

    print(f"this   {trees['this']}\nother  {trees['other']}  (--src)")
    print(f"{args.repeat} runs a command a tree, alternating; CPU s (user + sys), children in\n")
    print("| command | other: median (min-max) | this: median (min-max) | other / this | pairs |")
    print("|---|---:|---:|---:|---|")
    for name in names:
        a, b = cpu[(name, "this")], cpu[(name, "other")]
        ratios = [y / x for x, y in zip(a, b, strict=True) if x > 0]
        print(
            f"| {name} | {statistics.median(b):.2f} ({spread(b)}) | {statistics.median(a):.2f} "
            f"({spread(a)}) | {statistics.median(b) / statistics.median(a):.2f} | "
            f"median {statistics.median(ratios):.2f}, {spread(ratios)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
