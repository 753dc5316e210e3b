"""An out-of-tree plug-in (tests/plugin_example, package ``pgrig_example``) adds
a workload, a target kind, a report section and a conclusion rule through its
``pgrig.plugins`` entry points, with no edit to pgrig: installed for real (pip,
into a directory of this test only), then the real ``pgrig plan``, ``pgrig run``
and ``pgrig report`` see it. Without its entry point line pgrig does not know
the workload: the plug-in is found through the entry points, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import full_report

PLUGIN = Path(__file__).parent / "plugin_example"


def copy(tmp_path: Path) -> Path:
    """The plug-in's source, copied: building it leaves build/ and egg-info
    beside its pyproject.toml, which stay out of the repository."""
    return Path(shutil.copytree(PLUGIN, tmp_path / "plugin"))


def install(source: Path, into: Path) -> dict[str, str]:
    """Install the plug-in package into ``into`` (not into the suite's
    environment) and return the environment that sees it."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(into), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return {**os.environ, "PYTHONPATH": str(into)}


def pgrig(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgrig", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def campaign_file(path: Path, disk_dir: Path) -> Path:
    path.write_text(
        f"""
[campaign]
name = "example-study"
monitor = false

[[target]]
name = "scratch1"
kind = "scratch"
label = "a scratch directory"
directory = "{disk_dir}"
profile = "stock"

[probes]
timing = false
fsync = false
fio = false

[[workload]]
type = "example"
rows = 4321
"""
    )
    return path


def test_an_installed_plugin_adds_a_workload_a_kind_a_section_and_a_rule(
    disk_dir: Path, tmp_path: Path
) -> None:
    env = install(copy(tmp_path), tmp_path / "site")
    camp = campaign_file(tmp_path / "example.toml", disk_dir)

    planned = pgrig("plan", camp, env=env)
    assert planned.returncode == 0, planned.stderr
    assert "scratch1/example/count/r1" in planned.stdout

    results = tmp_path / "results"
    ran = pgrig("run", camp, "--results", results, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "example count of 4321 rows" in ran.stdout + ran.stderr

    out = tmp_path / "report"
    reported = pgrig("report", "--results", results, "--out", out, env=env)
    assert reported.returncode == 0, reported.stderr
    md = full_report(out)
    text = md.read_text()
    assert "## Example counts" in text  # its section
    assert "| scratch1 | 4,321 |" in text
    assert "scratch1: the example counted all 4,321 rows." in text  # its rule's conclusion
    assert list(disk_dir.iterdir()) == []  # the scratch kind's cluster is gone


def test_without_its_entry_point_line_pgrig_does_not_know_the_workload(
    disk_dir: Path, tmp_path: Path
) -> None:
    source = copy(tmp_path)
    pyproject = source / "pyproject.toml"
    lines = pyproject.read_text().splitlines(keepends=True)
    pyproject.write_text("".join(li for li in lines if not li.startswith("example_workload =")))
    env = install(source, tmp_path / "site")

    planned = pgrig("plan", campaign_file(tmp_path / "example.toml", disk_dir), env=env)
    assert planned.returncode != 0
    assert "example" in planned.stderr and "type" in planned.stderr
