"""Settings as campaign axes (io_method, io_workers): parsed into target variants,
refused before anything runs where a version cannot take them (io_uring without
liburing, io_method before 18), and run for real on PostgreSQL 18 with the
report's pg_stat_io beside the throughput."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import campaign, lifecycle, registry
from pgrig.cluster import aio
from pgrig.cluster.server import server_os_user
from pgrig.errors import UsageError
from pgrig.pgsource import binaries
from pgrig.registry.target import Demands
from pgrig.report import variants
from pgrig.report.writer import write as write_report
from pgrig.runner import run_campaign
from pgrig.store import Store
from pgrig.ui import Ui

HEAD = '[campaign]\nname = "ax"\n'
TARGET = '[[target]]\nname = "a"\ndirectory = "{dir}"\nprofile = "stock"\n'


def load(tmp_path: Path, text: str) -> campaign.Campaign:
    path = tmp_path / "c.toml"
    path.write_text(text.replace("{dir}", str(tmp_path)))
    return campaign.load(path)


def test_axes_expand_into_named_variants(tmp_path: Path) -> None:
    camp = load(
        tmp_path,
        HEAD + 'versions = ["15", "18"]\naxes = { io_method = ["sync", "worker"], '
        "io_workers = [1, 4] }\n" + TARGET + '[target.set]\nwork_mem = "8MB"\n',
    )
    names = [t.name for t in camp.targets]
    assert names[:4] == [
        "pg15-io_method-sync-io_workers-1",
        "pg15-io_method-sync-io_workers-4",
        "pg15-io_method-worker-io_workers-1",
        "pg15-io_method-worker-io_workers-4",
    ]
    assert len(names) == 8 and names[4].startswith("pg18-")
    last = camp.targets[-1]
    assert last.pg_bin == "18" and last.axes == (("io_method", "worker"), ("io_workers", "4"))
    assert last.settings == {"work_mem": "8MB", "io_method": "worker", "io_workers": "4"}
    assert camp.baseline == names[0]
    # Two targets, no versions: the target's name leads.
    two = load(
        tmp_path,
        HEAD + "axes = { effective_io_concurrency = [0, 16] }\n" + TARGET
        + TARGET.replace('"a"', '"b"'),
    )  # fmt: skip
    assert [t.name for t in two.targets] == [
        "a-effective_io_concurrency-0",
        "b-effective_io_concurrency-0",
        "a-effective_io_concurrency-16",
        "b-effective_io_concurrency-16",
    ]


@pytest.mark.parametrize(
    ("axes", "target_set", "message"),
    [
        ('{ io_method = "worker" }', "", "give the values to compare as a list"),
        ('{ io_method = ["sync", "sync"] }', "", "a value is listed twice"),
        ('{ io_method = [["x"]] }', "", "a setting's value"),
        ('{ io_method = ["sync"] }', '[target.set]\nio_method = "worker"\n', "axes vary it"),
    ],
)
def test_bad_axes_name_the_line_and_fix(
    tmp_path: Path, axes: str, target_set: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message) as exc:
        load(tmp_path, HEAD + f"axes = {axes}\n" + TARGET + target_set)
    assert "c.toml:" in str(exc.value)


def test_variants_whose_names_would_collide_are_refused(tmp_path: Path) -> None:
    # "a,b" and "a, b" are different settings but the same name part
    with pytest.raises(UsageError, match="would both be named") as exc:
        load(tmp_path, HEAD + 'axes = { search_path = ["a,b", "a, b"] }\n' + TARGET)
    assert "c.toml:" in str(exc.value)


@pytest.mark.parametrize("axis", ['versions = ["15", "18"]', 'axes = { work_mem = ["4MB"] }'])
def test_versions_and_axes_on_an_existing_server_are_refused(tmp_path: Path, axis: str) -> None:
    server = '[[target]]\nname = "a"\ndsn = "host=/nonexistent"\n'
    with pytest.raises(UsageError, match="existing server") as exc:
        load(tmp_path, HEAD + axis + "\n" + server)
    assert "c.toml:" in str(exc.value)


def test_an_axis_a_version_lacks_is_refused(tmp_path: Path) -> None:
    """io_method on 15 would run the same server twice: refused, not dropped."""
    camp = load(
        tmp_path, HEAD + 'versions = ["15"]\naxes = { io_method = ["sync", "worker"] }\n' + TARGET
    )
    with pytest.raises(UsageError, match="axis io_method cannot vary on PostgreSQL 15"):
        lifecycle.check_target(camp.targets[0], registry.target_kind(camp.targets[0]), Demands())


def test_io_uring_refused_with_the_missing_part(
    tmp_path: Path, pg_releases: dict[str, object]
) -> None:
    """The builds obtainable here lack liburing: the server's own parser says so,
    before anything is created. (Where a build has it, the check passes.)"""
    camp = load(
        tmp_path, HEAD + 'versions = ["18"]\naxes = { io_method = ["io_uring"] }\n' + TARGET
    )
    t = camp.targets[0]
    bins = binaries.find("18")
    problems = aio.io_uring_problems(bins, server_os_user())
    if not problems:
        pytest.skip("this PostgreSQL 18 has io_uring: nothing to refuse")
    with pytest.raises(UsageError, match="io_method = io_uring cannot work here") as exc:
        lifecycle.check_target(t, registry.target_kind(t), Demands())
    assert "built without liburing" in str(exc.value) or "kernel" in str(exc.value)
    assert "drop io_uring" in (exc.value.hint or "")
    assert not list(tmp_path.glob("pgrig-*"))  # nothing was created


def test_kernel_switch_for_io_uring_is_read(tmp_path: Path) -> None:
    sysctl = tmp_path / "io_uring_disabled"
    sysctl.write_text("2\n")
    assert "switched off" in (aio.kernel_problem(sysctl) or "")
    sysctl.write_text("1\n")
    assert "kernel.io_uring_group" in (aio.kernel_problem(sysctl) or "")


def test_io_method_axis_on_real_18_with_pg_stat_io(
    pg_releases: dict[str, object], disk_dir: Path, tmp_path: Path
) -> None:
    """Two PostgreSQL 18 clusters, sync and worker, a tiny select-only run each;
    the report sets their tps beside pg_stat_io's reads of the same runs."""
    text = (
        HEAD + 'versions = ["18"]\naxes = { io_method = ["sync", "worker"] }\n'
        + TARGET.replace("{dir}", str(disk_dir))
        + '[target.set]\nshared_buffers = "16MB"\nio_workers = 2\n'
        + "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        + '[[workload]]\ntype = "tpcb"\nscales = [2]\nmodes = ["select-only"]\n'
        + "clients = [2]\nduration = 2\ncount = false\n"
    )  # fmt: skip
    camp = load(tmp_path, text)
    results = tmp_path / "results"
    run_campaign(
        camp, Ui(quiet=True), results=results, store=results / "results.sqlite",
        yes=False, keep=False, study_id=camp.name,
    )  # fmt: skip
    with Store.open(results / "results.sqlite") as st:
        study = st.study(camp.name)
        records = st.runs(camp.name)
    shown = {t: e.postgres.settings.get("io_method") for t, e in study.target_environments.items()}
    assert shown == {"pg18-io_method-sync": "sync", "pg18-io_method-worker": "worker"}
    section = variants.axes_section(study, records)
    assert section is not None and section.title == "Settings axes: io_method"
    (table,) = section.blocks
    assert table.columns[1] == "io_method" and table.columns[-3] == "buffer hit ratio"
    assert table.columns[-1] == "latency"
    rows = {r.cells[1]: r.cells for r in table.rows}
    assert set(rows) == {"sync", "worker"} and rows["sync"][3] == "(baseline)"
    assert "p=" in rows["worker"][3] or "a verdict needs ≥ 3 a side" in rows["worker"][3]
    for cells in rows.values():  # shared_buffers (16MB) < data (30MB): it read
        assert cells[4] != "n/a" and float(cells[5].replace(",", "")) > 0
        assert str(cells[-1]).startswith("p95 ")  # pgbench's log: latency beside the tps
    md, _ = write_report(study, records, tmp_path / "report")
    assert "## Settings axes: io_method" in md.read_text()
