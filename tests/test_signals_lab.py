"""The signal suite's cells on the storage lab's targets and the lossy filesystem
(tests/test_signals.py has the rest, the helpers and what every cell asserts):
a run in a memory cgroup and its teardown, `pgrig durability --power-loss`'s
cycles and teardown. A file of its own so that the suite's workers share the
slow cells out."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import test_signals
from pgrig import lossyfs
from pgrig.durability import crasher
from pgrig.lossyfs import LossyMount
from pgrig.storage import cgroups
from pgrig.store import Store
from test_faults import _main, place
from test_signals import (
    ALL,
    DATA,
    ON_THE_WAY,
    RUN,
    TPCB,
    Arm,
    Cell,
    _chain,
    _child_argv,
    _nothing_left,
    _phase,
    _recorded,
    _sweep,
    call,
    tool,
)

__all__ = ["_sweep", "place"]  # the fixtures, shared with test_signals.py


def _spy_cgroups(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories of every cgroup pgrig makes (the real ``create`` runs)."""
    made: list[Path] = []
    real = cgroups.create

    def create(*args: Any, **kwargs: Any) -> cgroups.Cgroup:
        group = real(*args, **kwargs)
        made.extend(group.dirs.values())
        return group

    monkeypatch.setattr(cgroups, "create", create)
    return made


MEMORY, LAB = f"{RUN}/memory", "t/lab"  # the cgroup's reading after the run; the lab built
MEMORY_CELLS = [
    *_phase("memory-cgroup run", ON_THE_WAY, tool(_child_argv("pgbench", "-T")), (LAB, *DATA)),
    Cell(
        "memory-cgroup run",
        signal.SIGTERM,
        "as the run is recorded, before its cgroup reading",
        call(Store, "record", after=True, when=lambda _st, rec, *_: rec.key == RUN),
        frozenset((LAB, *DATA, RUN, MEMORY)),
    ),
    Cell(
        "teardown (memory cgroup)",
        signal.SIGHUP,
        "as the cgroup is removed",
        call(cgroups, "remove_dir"),
        frozenset((LAB, *ALL, MEMORY)),
    ),
]


def test_run_in_a_memory_cgroup_signalled(
    place: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lab target with ``memory = ...``: the server runs in a memory cgroup,
    which goes with the server whatever signal comes."""
    target = f'directory = "{place / "data"}"\nmemory = "256MiB"'
    (place / "c.toml").write_text(TPCB.format(target=target))
    made = _spy_cgroups(monkeypatch)
    _chain(MEMORY_CELLS, place, monkeypatch, capsys, (LAB, *ALL, MEMORY), cgroup_dirs=made)
    assert made, "no cgroup was made: the target was not memory-limited"


# A moment of each kind per signal: under load, with the power going, while the
# filesystem comes back (mount gone, FUSE daemon exited, cluster down) - and the
# teardown once the check is over (its verdict recorded).
VERDICT = ["local/durability"]
POWER_LOSS = [
    ("power-loss run", signal.SIGINT, "as the crash is sent, under load", call(crasher, "crash"),
     []),
    ("power-loss run", signal.SIGTERM, "as the power is cut", call(LossyMount, "power_loss"), []),
    ("power-loss run", signal.SIGHUP, "as the filesystem is mounted again",
     call(LossyMount, "remount"), []),
    ("power-loss teardown", signal.SIGINT, "as the filesystem is unmounted",
     call(LossyMount, "unmount"), VERDICT),
]  # fmt: skip


@pytest.mark.skipif(lossyfs.available() is not None, reason=f"no FUSE: {lossyfs.available()}")
@pytest.mark.parametrize(
    ("phase", "signum", "moment", "arm", "recorded"),
    POWER_LOSS,
    ids=[f"{p[0]}-{signal.Signals(p[1]).name}" for p in POWER_LOSS],
)
def test_durability_power_loss_signalled(
    phase: str,
    signum: int,
    moment: str,
    arm: Arm,
    recorded: list[str],
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A power-loss run of `pgrig durability`: the FUSE daemon, its mount, the
    cluster on it and the holder directory are gone; the study is interrupted,
    with a verdict only when the check was over."""
    arm(monkeypatch, signum)
    code = _main(
        "durability", "--power-loss", "--target", str(place / "data"), "--results", "res",
        "--profile", "stock", "--cycles", "1", "--interval", "0.6", "--clients", "2", "-q",
    )  # fmt: skip
    err = capsys.readouterr().err
    where = f"{phase} / {signal.Signals(signum).name} ({moment})"
    assert code == 128 + signum, f"{where}: exit {code}\n{err}"
    assert "interrupted" in err and "Traceback" not in err, f"{where}: {err}"
    _nothing_left(place, where)
    assert _recorded(place / "res") == ("interrupted", recorded), where


def test_the_matrix_in_the_docs_is_this_suite() -> None:
    """docs/exit-codes.md's matrix names every phase and every test of the suite."""
    text = (Path(__file__).parents[1] / "docs" / "exit-codes.md").read_text()
    cells: Sequence[Any] = test_signals.DIRECTORY_CELLS + test_signals.SERVER_CELLS + MEMORY_CELLS
    phases = {c.phase for c in cells} | {p[0] for p in POWER_LOSS}
    phases |= {"probe", "fio", "storage-lab setup", "storage-lab teardown", "report writing"}
    missing = [p for p in sorted(phases) if f"| {p} |" not in text]
    assert missing == [], f"docs/exit-codes.md's matrix lacks the phases {missing}"
    tests = [
        name
        for module in (test_signals, sys.modules[__name__])
        for name, value in vars(module).items()
        if name.startswith("test_") and callable(value)
        if name != "test_the_matrix_in_the_docs_is_this_suite"
    ]
    assert [t for t in tests if f"`{t}`" not in text] == []
