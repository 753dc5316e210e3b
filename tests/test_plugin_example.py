"""An out-of-tree plug-in (tests/plugin_example, package ``pgrig_example``) adds
two workloads (a count, a COPY), a target kind, a report section and a
conclusion rule through its ``pgrig.plugins`` entry points, with no edit to
pgrig: installed for real (pip, into a directory of this test only), then the
real ``pgrig plan``, ``pgrig run``, ``pgrig report``, ``pgrig plugins`` and
``pgrig keys`` see it. Without its entry point line pgrig does not know the
workload: the plug-in is found through the entry points, nothing else. A bad
plug-in is refused when it registers, with nothing of it left registered."""

from __future__ import annotations

import os
import re
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

[[workload]]
type = "copy"
rows = 5000
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

    listed = pgrig("plugins", env=env)  # what is loaded, from where, what it registered
    assert listed.returncode == 0, listed.stderr
    assert "example_workload  (pgrig-example 0.1.0: pgrig_example.workload:WORKLOAD)" in (
        listed.stdout
    )
    assert "    step action: example.count" in listed.stdout
    assert "    report section: example" in listed.stdout
    assert "example_copy  (pgrig-example 0.1.0: pgrig_example.copy:WORKLOAD)" in listed.stdout
    assert "    result kind: copy_rows" in listed.stdout
    keys = pgrig("keys", "example", env=env)  # its campaign keys, from its schema
    assert keys.returncode == 0, keys.stderr
    assert keys.stdout.startswith('type = "example"\n')
    assert "| `rows` | `1000` | rows to count |" in keys.stdout
    copy_keys = pgrig("keys", "copy", env=env)
    assert copy_keys.returncode == 0, copy_keys.stderr
    assert copy_keys.stdout.startswith('type = "copy"\n')
    assert "| `rows` | `10000` | rows to COPY into a fresh table per run |" in copy_keys.stdout
    assert '| `label` | `"scratch"` |' in pgrig("keys", "scratch", env=env).stdout

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
    # No pgbench workload ran: no section of it, no row, no "Not run" line.
    assert "TPC-B" not in text and "(pgbench)" not in text and "Not run in this study" not in text
    # The COPY's rows/s reaches the summary from its kind's summary and unit alone.
    # (its answer too: "COPY (copy): 181,447 rows/s (one run)."; the figure not fixed here).
    (copy_row,) = [li for li in text.splitlines() if li.startswith("| **COPY (copy)** |")]
    assert copy_row.endswith(" rows/s** |")
    assert re.search(r"^COPY \(copy\): [\d,]+ rows/s", text, re.MULTILINE)
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


def test_a_bad_plugin_is_refused_when_it_registers_and_can_be_left_out(
    disk_dir: Path, tmp_path: Path
) -> None:
    """A workload without a schema (it registered silently before and failed
    later): refused by name with nothing of it registered, and the run goes on
    once it is left out (PGRIG_DISABLE_PLUGINS, or -p no:NAME)."""
    source = copy(tmp_path)
    module = source / "pgrig_example" / "workload.py"
    module.write_text(module.read_text().replace("    schema = SCHEMA\n", ""))
    env = install(source, tmp_path / "site")

    refused = pgrig("plugins", env=env)
    assert refused.returncode == 1
    assert "error: the plug-in example_workload (pgrig_example.workload:WORKLOAD) is refused" in (
        refused.stderr
    )
    assert "workload 'example': it has no schema" in refused.stderr
    assert "PGRIG_DISABLE_PLUGINS=example_workload" in refused.stderr
    assert "Traceback" not in refused.stderr

    left_out = pgrig("plugins", env={**env, "PGRIG_DISABLE_PLUGINS": "example_workload"})
    assert left_out.returncode == 0, left_out.stderr
    assert (
        "example_workload  (pgrig-example 0.1.0: pgrig_example.workload:WORKLOAD)\n"
        "    disabled by PGRIG_DISABLE_PLUGINS=example_workload" in left_out.stdout
    )
    assert "    target kind: scratch" in left_out.stdout  # its other parts still load

    camp = campaign_file(tmp_path / "c.toml", disk_dir)
    planned = pgrig("-p", "no:example_workload", "plan", camp, env=env)
    assert planned.returncode == 2  # the campaign names a workload left out: a usage error
    assert "example" in planned.stderr and "Traceback" not in planned.stderr


def test_a_plugin_that_fails_halfway_leaves_nothing_of_it_registered(tmp_path: Path) -> None:
    """pgrig_example.bad registers a report section, then a workload without a
    schema: refused by its entry point's name, and the section it added first
    is gone too (all or nothing, as pluggy registers a plug-in)."""
    source = copy(tmp_path)
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace(
        'example_copy = "pgrig_example.copy:WORKLOAD"',
        'example_copy = "pgrig_example.copy:WORKLOAD"\nexample_bad = "pgrig_example.bad"',
    ))  # fmt: skip
    env = install(source, tmp_path / "site")

    refused = pgrig("plugins", env=env)
    assert refused.returncode == 1
    assert "error: the plug-in example_bad (pgrig_example.bad) is refused, nothing of it is " in (
        refused.stderr
    )
    assert "workload 'schemaless': it has no schema" in refused.stderr
    assert "Traceback" not in refused.stderr

    # In one process, as a library caller sees it: refused, refused again when
    # asked again (never a registry holding half the plug-ins), and nothing of it
    # in the tables (read directly: every public reader refuses).
    probe = (
        "from pgrig import registry\n"
        "from pgrig.errors import PgrigError\n"
        "from pgrig_example import bad\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        registry.workloads()\n"
        "    except PgrigError as exc:\n"
        "        print(exc.message.split(':')[0].replace(' ', '_'))\n"
        "print(any(s is bad.section for s in registry._SECTIONS.values()),\n"
        "      'schemaless' in registry._WORKLOADS, 'example_bad' in registry._PLUGINS)\n"
    )
    left = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip
    assert left.returncode == 0, left.stderr
    refusal = "the_plug-in_example_bad_(pgrig_example.bad)_is_refused,_nothing_of_it_is_registered"
    assert left.stdout.split() == [refusal, refusal, "False", "False", "False"]

    without = pgrig("-p", "no:example_bad", "plugins", env=env)
    assert without.returncode == 0, without.stderr
    assert (
        "example_bad  (pgrig-example 0.1.0: pgrig_example.bad)\n    disabled by -p no:example_bad"
        in (without.stdout)
    )
    assert "    workload: copy" in without.stdout


def test_a_plugin_that_cannot_be_imported_is_refused_every_time_it_is_asked(
    tmp_path: Path,
) -> None:
    """An entry point naming a module its package lacks: an error naming it and
    how to leave it out, and in one process the same error again on the next
    use, never a registry holding the plug-ins loaded before it."""
    source = copy(tmp_path)
    pyproject = source / "pyproject.toml"
    line = 'example_copy = "pgrig_example.copy:WORKLOAD"'
    gone = 'example_gone = "pgrig_example.gone:WORKLOAD"'
    pyproject.write_text(pyproject.read_text().replace(line, f"{line}\n{gone}"))
    env = install(source, tmp_path / "site")

    refused = pgrig("plugins", env=env)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "error: the plug-in example_gone (pgrig_example.gone:WORKLOAD) cannot be loaded" in (
        refused.stderr
    )
    assert "PGRIG_DISABLE_PLUGINS=example_gone" in refused.stderr
    probe = (
        "from pgrig import registry\n"
        "from pgrig.errors import PgrigError\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        print(len(registry.workloads()))\n"
        "    except PgrigError as exc:\n"
        "        print(exc.message.split(' (')[0].replace(' ', '_'))\n"
    )
    asked = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           timeout=120, env=env)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.split() == ["the_plug-in_example_gone"] * 2
