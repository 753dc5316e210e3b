"""`pgrig --help` is quick: the command list comes from names and source text,
not from importing every command, plug-in and library (issue 41.5)."""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from disturbance import undisturbed, unless_met, watched_by
from pgrig import cli

PGRIG = Path(sys.executable).with_name("pgrig")
BOUND_S = 0.3


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _judged(
    best_of_three: Callable[[], list[float]], where: Path, bound: float = BOUND_S
) -> list[float]:
    """CPU seconds of up to three starts, kept when one is under the bound; over
    it, judged only where pgrig's monitor saw no other load meanwhile: beside two
    CPU hogs (ci16) a start took 0.30-0.35 s where alone it takes 0.11-0.25 (the
    caches and the CPU's time shared), so such an attempt is made again, up to
    three times, and not judged if every one was disturbed. Met at once, it
    costs no wait for a quiet moment (3 s a test on a quiet machine)."""
    took = best_of_three()
    if min(took) < bound:
        return took
    return undisturbed(best_of_three, unless_met(watched_by(where), lambda took: min(took) < bound))


def test_pgrig_help_takes_under_0_3_s_of_cpu(tmp_path: Path) -> None:
    """CPU time, not wall time: on the shared machine the wall time of one start
    was 2-6 s when other suites ran, its CPU time 0.1 s. The best of three, as a
    neighbour's cache traffic only adds to it (before: 0.9 s, every plug-in
    imported to list the commands)."""

    def best_of_three() -> list[float]:
        took = []
        for _ in range(3):
            before = _children_cpu()
            done = subprocess.run(
                [str(PGRIG), "--help"], capture_output=True, text=True, timeout=120, check=True
            )
            took.append(_children_cpu() - before)
            assert "Commands:" in done.stdout and "run" in done.stdout
        return took

    took = _judged(best_of_three, tmp_path)
    assert min(took) < BOUND_S, f"pgrig --help took {min(took):.2f} s of CPU (best of {took})"


def test_pgrig_help_imports_no_command_and_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from pgrig.cli import cli\n"
        "try:\n"
        "    cli.main(['--help'], prog_name='pgrig', standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'scipy', 'psycopg', 'rich', 'asyncssh') "
        "or m.startswith(('pgrig.commands', 'pgrig.registry', 'pgrig.monitor')))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True)


def test_the_listing_says_what_each_command_says_of_itself() -> None:
    """The stand-ins of the listing (help read from the source) against the real
    commands, loaded: the same name and the same line in `pgrig --help`; and
    each of pgrig's NAME-command entry points is a command named NAME."""
    own, _ = cli._plugin_commands()
    assert {"tpcc", "durability", "pg", "hosts", "audit", "storage"} <= set(own)
    for name, where in {**own, **cli.CORE}.items():
        real = cli._load(where)
        assert real.name == name, where
        doc = cli._docstring(where)
        assert doc is not None, f"{where}: no help readable from its source"
        assert click.Command(name, help=doc).get_short_help_str(200) == real.get_short_help_str(
            200
        ), where


def test_the_entry_points_group_is_the_registrys() -> None:
    from pgrig import registry

    assert cli.GROUP == registry.GROUP and cli.OWN == registry.OWN


# Each command's own --help: the module that declares it is loaded, not what it
# does (0.4-0.6 s of CPU before: every command module imported the registry).
# Counted inside the process, so the interpreter's start is in it as for a user.
_HELP = (
    "import resource, sys\n"
    "from pgrig.cli import cli\n"
    "try:\n"
    "    cli.main([*sys.argv[1:], '--help'], prog_name='pgrig', standalone_mode=False)\n"
    "except SystemExit:\n"
    "    pass\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
    "('numpy', 'scipy', 'hdrh') or m.startswith(('pgrig.registry', 'pgrig.runner', "
    "'pgrig.report', 'pgrig.campaign')))\n"
    "print(u.ru_utime + u.ru_stime, ' '.join(heavy))\n"
)
SUBCOMMANDS = [
    *[(name,) for name in sorted({*cli.CORE, *cli._plugin_commands()[0]})],
    ("tpcc", "study"),
    ("hosts", "check"),
    ("pg", "install"),
]


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=" ".join)
def test_each_commands_help_takes_under_0_3_s_of_cpu(argv: tuple[str, ...], tmp_path: Path) -> None:
    """Best of three, stopping at the first under the bound (a neighbour's load
    only adds CPU time); no numerical library, registry or report loaded at all."""

    def best_of_three() -> list[float]:
        took: list[float] = []
        for _ in range(3):
            done = subprocess.run(
                [sys.executable, "-c", _HELP, *argv],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            cpu, _, heavy = done.stdout.strip().splitlines()[-1].partition(" ")
            assert not heavy, f"pgrig {' '.join(argv)} --help loaded {heavy}"
            took.append(float(cpu))
            if took[-1] < BOUND_S:
                break
        return took

    took = _judged(best_of_three, tmp_path)
    assert min(took) < BOUND_S, f"pgrig {' '.join(argv)} --help: {took} s of CPU"


# A real command's start (issue 41): what the command imports before its work,
# counted inside the process as _HELP is. The heavy libraries come where they
# are used: NumPy where a log is read or rows are built, asyncssh where an SSH
# connection is made, scipy.special (not scipy.stats) where an interval is
# computed. Before (session 16): a refused run 0.66-0.70 s of CPU with NumPy
# and asyncssh loaded, a report 1.45 s with scipy.stats; docs/bench.md,
# "Starting a pgrig process".
_START = (
    "import resource, sys\n"
    "from pgrig.cli import main\n"
    "code = 0\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print('\\n', code, u.ru_utime + u.ru_stime, ' '.join(sorted(sys.modules)))\n"
)


def _refused(tmp_path: Path) -> list[str]:
    return [
        "run",
        "--target",
        str(tmp_path),
        "--results",
        str(tmp_path / "r"),
        "--pg-bin",
        "/nonexistent",
    ]


def _report(tmp_path: Path) -> list[str]:
    from test_export import make_store

    make_store(tmp_path / "results.sqlite", "quick-1", [100.0, 110.0, 104.0])
    return ["report", "quick-1", "--results", str(tmp_path)]


@pytest.mark.parametrize(
    ("argv", "exit_code", "bound", "never", "needed"),
    [
        # bad input refused before anything is made: the registry loaded, no library
        (_refused, 3, 6.0, ("numpy", "scipy", "asyncssh", "cryptography"), ()),
        # the report of a stored study: its intervals through scipy.special
        (_report, 0, 9.0, ("scipy.stats", "asyncssh", "cryptography"), ("scipy.special",)),
    ],
    ids=["refused run", "report"],
)
def test_a_commands_start_loads_only_what_its_work_needs(
    argv: Callable[[Path], list[str]],
    exit_code: int,
    bound: float,
    never: tuple[str, ...],
    needed: tuple[str, ...],
    tmp_path: Path,
) -> None:
    """The CPU of the whole process (its interpreter's start included) under
    ``bound`` times that of a ``pgrig --help`` started just before it, best of
    three, judged as ``--help``'s; and the libraries it loaded: none of ``never``
    (a module or a package), each of ``needed``.

    In units of ``--help``, not seconds: the same work's CPU time moves with
    the machine hosting this one, which pgrig's monitor cannot see (ci23,
    quiet: a refused run 0.84 s and a report 1.23-1.38 where the same code took
    0.66 and 0.95 an hour before; ``--help`` 0.17 against 0.14). Measured
    here: a refused run 2.6-5.0 helps, a report 6.8-7.4; before the libraries
    came where they are used (session 16), 6.5 and 12.9."""
    args = argv(tmp_path)

    def start(argv: list[str]) -> tuple[int, float, set[str]]:
        done = subprocess.run(
            [sys.executable, "-c", _START, *argv], capture_output=True, text=True, timeout=120
        )
        code, cpu, *names = done.stdout.strip().splitlines()[-1].split()
        return int(code), float(cpu), set(names)

    def best_of_three() -> list[float]:
        took: list[float] = []
        for _ in range(3):
            _, help_cpu, _ = start(["--help"])
            code, cpu, loaded = start(args)
            assert code == exit_code, f"pgrig {' '.join(args)} exited {code}"
            wrong = sorted({n for n in never for m in loaded if m == n or m.startswith(f"{n}.")})
            assert not wrong, f"pgrig {' '.join(args)} loaded {wrong}"
            assert set(needed) <= loaded, f"pgrig {' '.join(args)} did not load {needed}"
            took.append(cpu / help_cpu)
            if took[-1] < bound:
                break
        return took

    took = _judged(best_of_three, tmp_path, bound)
    assert min(took) < bound, f"pgrig {' '.join(args)}: {took} times --help's CPU"
