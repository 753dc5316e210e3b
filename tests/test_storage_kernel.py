"""Kernel settings as an axis: set around each point of the variant that asks
for them, put back after it, and put back by the next run or `pgrig clean` when
pgrig was killed with -9 in between. Real /proc/sys writes (root); the setting
used, vm.dirty_expire_centisecs, is moved by a few hundredths of a second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgrig.errors import UsageError
from pgrig.storage import kernel

KNOB = "vm.dirty_expire_centisecs"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="kernel settings need root")


def test_applied_around_the_block_and_restored_after_an_error() -> None:
    before = kernel.read(KNOB)
    other = str(int(before) + 3)
    with pytest.raises(RuntimeError), kernel.applied([(KNOB, other)]):
        assert kernel.read(KNOB) == other
        assert list(kernel.registry_dir().glob("*.json"))  # recorded while changed
        raise RuntimeError("the step failed")
    assert kernel.read(KNOB) == before
    assert not list(kernel.registry_dir().glob("*.json"))


def test_a_kill_9_leaves_a_record_the_next_run_restores_from() -> None:
    before = kernel.read(KNOB)
    other = str(int(before) + 7)
    code = (
        "import os, signal\n"
        "from pgrig.storage import kernel\n"
        f"with kernel.applied([({KNOB!r}, {other!r})]):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], timeout=60)
        assert done.returncode == -9
        assert kernel.read(KNOB) == other  # left changed by the killed process
        lines = kernel.restore_orphans()
        assert kernel.read(KNOB) == before
        assert lines and lines[0].startswith(f"restored {KNOB} = {before} (left by killed")
    finally:
        kernel._write(KNOB, before)  # never leave the machine changed, whatever failed


def test_two_pgrigs_on_one_machine_take_turns_and_leave_it_as_it_was() -> None:
    """Two studies (two CI jobs) with kernel settings at once: without turns the
    second saved the first's value as its original and wrote it back after the
    first had restored the machine's, leaving it changed for good."""
    before = kernel.read(KNOB)
    code = (
        "import sys\n"
        "from pgrig.storage import kernel\n"
        "print('ready', flush=True)\n"
        f"with kernel.applied([({KNOB!r}, sys.argv[1])]):\n"
        f"    print(kernel.read({KNOB!r}), flush=True)\n"
        "    sys.stdin.readline()\n"  # held until the test says
    )

    def study(value: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", code, str(value)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def line(p: subprocess.Popen[str]) -> str:
        assert p.stdout is not None
        return p.stdout.readline().strip()

    def end(p: subprocess.Popen[str]) -> None:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0

    try:
        with study(int(before) + 5) as first:
            assert line(first) == "ready" and line(first) == str(int(before) + 5)
            second = study(int(before) + 6)
            assert line(second) == "ready"
            time.sleep(0.5)  # the second asks for its settings while the first holds its own
            end(first)
        with second:
            assert line(second) == str(int(before) + 6)
            end(second)
        assert kernel.read(KNOB) == before, "the machine's own value is back"
    finally:
        kernel._write(KNOB, before)


def test_a_bytes_setting_is_put_back_through_the_ratio_that_was_in_force() -> None:
    """Writing vm.dirty_background_bytes zeroes vm.dirty_background_ratio, and the
    kernel refuses a 0 back (EINVAL): seed 002's setting stayed on this machine
    and every later run said "could not restore vm.dirty_background_bytes = 0"."""
    names = ("vm.dirty_background_bytes", "vm.dirty_background_ratio")
    before = {n: kernel.read(n) for n in names}
    try:
        with kernel.applied([("vm.dirty_background_bytes", "102400000")]):
            assert kernel.read("vm.dirty_background_bytes") == "102400000"
            assert kernel.read("vm.dirty_background_ratio") == "0"
        assert {n: kernel.read(n) for n in names} == before
        assert not list(kernel.registry_dir().glob("*.json"))
    finally:
        for name, value in kernel._to_write(before).items():
            kernel._write(name, value)


def test_unknown_names_and_refused_values_are_named() -> None:
    with pytest.raises(UsageError, match="vm.no_such_thing is not a kernel setting"):
        kernel.check([("vm.no_such_thing", "1")])
    before = kernel.read(KNOB)
    with pytest.raises(UsageError, match=f"the kernel refused {KNOB} = -5"):
        kernel.check([(KNOB, "-5")])
    assert kernel.read(KNOB) == before


CAMPAIGN = """\
[campaign]
name = "dirty"
axes = {{ "{knob}" = ["{a}", "{b}"] }}
repeat = 1

[[target]]
name = "disk"
directory = "{target}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "custom"
name = "probe"
scripts = ["probe.sql"]
clients = [1]
duration = 1
"""


def test_a_kernel_axis_runs_each_variant_with_its_value(disk_dir: Path) -> None:
    before = kernel.read(KNOB)
    a, b = str(int(before) + 1), str(int(before) + 2)
    seen = disk_dir / "seen"
    # pgbench's \\shell: what the kernel says while the measured run goes on
    (disk_dir / "probe.sql").write_text(
        f"\\shell cat /proc/sys/vm/dirty_expire_centisecs >> {seen}\nSELECT 1;\n"
    )
    target = disk_dir / "t"
    target.mkdir(mode=0o755)
    file = disk_dir / "dirty.toml"
    file.write_text(CAMPAIGN.format(knob=KNOB, a=a, b=b, target=target))
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "run", file, "--results", disk_dir / "r"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(seen.read_text().split()) == {a, b}  # each variant's runs saw its own value
    assert kernel.read(KNOB) == before
    assert f"vm.dirty_expire_centisecs-{a}" in done.stderr + done.stdout


def test_a_plan_writes_no_kernel_value(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pgrig plan` wrote each kernel value and put it back to test it (issue 40.7):
    a plan must change nothing. A tripwire on the one write (a mock only to prove
    none happens); the plan still refuses what the kernel does not offer."""
    from pgrig import cli

    def tripwire(name: str, value: str) -> None:
        raise AssertionError(f"the plan wrote {name} = {value}")

    monkeypatch.setattr(kernel, "_write", tripwire)
    before = kernel.read(KNOB)
    (disk_dir / "probe.sql").write_text("SELECT 1;\n")
    camp = disk_dir / "c.toml"
    camp.write_text(CAMPAIGN.format(knob=KNOB, a=int(before) + 1, b=int(before) + 2,
                                    target=disk_dir))  # fmt: skip
    cli.main(["plan", str(camp)])  # returns: exit 0
    assert "steps" in capsys.readouterr().out
    offered = (kernel.CLOCKSOURCE.parent / "available_clocksource").read_text().split()
    with pytest.raises(UsageError, match=f"this kernel offers {', '.join(offered)}"):
        kernel.check([("clocksource", "nosuch")], trial=False)
