"""Resource limits the server inherits from pgrig's shell (issue 40.4, 40.8):
``ulimit -s`` too small for max_stack_depth failed ``postgres -C`` and was
blamed on "profile oltp"; ``ulimit -v`` smaller than the shared memory made a
study, then "could not map anonymous shared memory" (exit 1). Both refused
before anything is created, naming the limit, its value and the fix. Real
limits: pgrig runs as a subprocess under ``resource.setrlimit``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import make_disk_dir

QUICK = (
    "run",
    "--skip",
    "timing,fsync,fio",
    "--scale",
    "1",
    "--clients",
    "1",
    "--duration",
    "1",
    "--repeat",
    "1",
    "--modes",
    "select-only",
    "--no-count",
)
KB = 1024


@pytest.fixture
def box() -> Iterator[Path]:
    path = make_disk_dir("pgrig-test-rlimit-")
    (path / "data").mkdir()
    (path / "data").chmod(0o777)  # the server's OS user makes its cluster there
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False, timeout=60)


def limited(stack_kb: int | None = None, as_kb: int | None = None) -> Callable[[], None]:
    def apply() -> None:
        if stack_kb is not None:
            resource.setrlimit(resource.RLIMIT_STACK, (stack_kb * KB, stack_kb * KB))
        if as_kb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (as_kb * KB, as_kb * KB))

    return apply


def quick(box: Path, limits: Callable[[], None], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pgrig",
            *QUICK,
            *extra,
            "--target",
            str(box / "data"),
            "--results",
            str(box / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limits,
        env=dict(os.environ, COLUMNS="1000"),
    )


@pytest.mark.parametrize(
    ("stack_kb", "as_kb", "extra", "code", "says", "fix"),
    [
        # the ulimit -s 256: under PostgreSQL's 100 kB + 512 kB, with any profile
        (256, None, (), 2, "ulimit -s (RLIMIT_STACK) is 256 kB", "hint: ulimit -s 8192"),
        # a max_stack_depth the user asked for must fit too: the setting named, not a profile
        (
            4096,
            None,
            ("--set", "max_stack_depth=6MB"),
            2,
            "max_stack_depth = 6MB (--set)",
            "or a lower max_stack_depth",
        ),
        # 1 GiB of address space for 1536MB of shared buffers
        (
            None,
            2**20,
            ("--set", "shared_buffers=1536MB"),
            5,
            "ulimit -v (RLIMIT_AS) is 1048576 kB (1.0 GiB)",
            "hint: ulimit -v unlimited",
        ),
    ],
)
def test_a_limit_the_server_cannot_start_under_is_refused_before_a_study(
    box: Path,
    stack_kb: int | None,
    as_kb: int | None,
    extra: tuple[str, ...],
    code: int,
    says: str,
    fix: str,
) -> None:
    done = quick(box, limited(stack_kb, as_kb), *extra)
    print(done.stderr)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert says in done.stderr and fix in done.stderr
    assert "profile oltp" not in done.stderr.split("\n")[0]  # it blamed the profile
    assert not (box / "r").exists(), "a store was made for a run that cannot start"
    assert list((box / "data").iterdir()) == []


def test_limits_the_server_starts_under_are_not_refused(box: Path) -> None:
    """Low limits that still fit: 1 MiB of stack (the server lowers its
    max_stack_depth to 512 kB by itself) and 1 GiB of address space for 128MB
    of shared buffers. The study runs: the estimate refuses no server that starts."""
    done = quick(box, limited(1024, 2**20), "--set", "shared_buffers=128MB")
    assert done.returncode == 0, done.stderr
    assert "ulimit" not in done.stderr
