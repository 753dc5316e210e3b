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


def _judged(best_of_three: Callable[[], list[float]], where: Path) -> list[float]:
    """CPU seconds of up to three starts, kept when one is under the bound; over
    it, judged only where pgrig's monitor saw no other load meanwhile: beside two
    CPU hogs (ci16) a start took 0.30-0.35 s where alone it takes 0.11-0.25 (the
    caches and the CPU's time shared), so such an attempt is made again, up to
    three times, and not judged if every one was disturbed. Met at once, it
    costs no wait for a quiet moment (3 s a test on a quiet machine)."""
    took = best_of_three()
    if min(took) < BOUND_S:
        return took
    return undisturbed(
        best_of_three, unless_met(watched_by(where), lambda took: min(took) < BOUND_S)
    )


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
