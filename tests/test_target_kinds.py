"""Target kinds behind one interface (pgrig.registry.target, docs/targets.md).

The toy kind here - a cluster on a tmpfs mounted for the study - is added
through ``pgrig.registry`` alone: no core file names it. A real study runs on
it (TPC-B select-only, scale 1, two seconds) and the report carries the kind's
own section. Mounting needs root, which the suite has here.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pgrig import campaign, lifecycle, proc, registry
from pgrig.campaign import TargetSpec
from pgrig.document.model import Row, Section, Table
from pgrig.environment import describe_filesystem
from pgrig.registry.target import Target
from pgrig.report.writer import write as write_report
from pgrig.results import ResultKind, RunRecord, Study
from pgrig.runner import run_campaign
from pgrig.schema import Schema, text
from pgrig.step import Call, Step, StepKey
from pgrig.store import Store
from pgrig.targets.throwaway import Throwaway
from pgrig.ui import Ui
from pgrig.units import parse_size


@dataclass(frozen=True)
class TmpfsBuilt:
    """What the toy kind's build step records: the mount as the kernel shows it."""

    mountpoint: str
    fstype: str
    size_bytes: int


class TmpfsKind(Throwaway):
    """The toy: a throwaway cluster on a tmpfs mounted under the target's directory."""

    name = "tmpfs"
    summary = "a throwaway cluster on a tmpfs mounted for the study (a test's toy kind)"
    schema = Schema("[[target]] tmpfs", text("tmpfs_size", "256MiB", "the tmpfs's size"))
    kinds = (ResultKind("tmpfs", TmpfsBuilt, headline=lambda r: f": {r.fstype} on {r.mountpoint}"),)

    def build_step(self, spec: TargetSpec) -> Step | None:
        return Step(
            key=StepKey(spec.name, "tmpfs"),
            kind="tmpfs",
            label=f"{spec.name}: mount a tmpfs",
            params={"size": spec.options["tmpfs_size"]},
            action=Call("target.build"),
        )

    @contextlib.contextmanager
    def storage(self, t: Target, ui: Ui, *, keep: Callable[[], bool]) -> Iterator[TmpfsBuilt]:
        assert t.directory is not None
        size = parse_size(t.spec.options["tmpfs_size"])
        mnt = t.directory / f"pgrig-tmpfs-{t.name}"
        mnt.mkdir()
        try:
            proc.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", mnt],
                timeout=30,
                what="mount",
            )
            try:
                fs = describe_filesystem(mnt)
                assert fs is not None
                t.moved_to(mnt)
                yield TmpfsBuilt(str(mnt), fs.fstype, fs.size_bytes)
            finally:
                proc.run(["umount", mnt], timeout=30, what="umount")
        finally:
            mnt.rmdir()

    def describe(self, t: Target) -> dict[str, Any]:
        return super().describe(t) | {"storage": f"tmpfs of {t.spec.options['tmpfs_size']}"}

    def section(self, study: Study, records: Sequence[RunRecord]) -> Section | None:
        built = [r for r in records if r.kind == "tmpfs" and r.status == "ok"]
        if not built:
            return None
        rows = tuple(
            Row((r.target, str(typed.fstype), f"{typed.size_bytes / 2**20:.0f} MiB"))
            for r in built
            if (typed := registry.typed_result(r)) is not None
        )
        return Section(
            "tmpfs targets", "tmpfs", blocks=(Table(("target", "filesystem", "size"), rows),)
        )


@pytest.fixture
def toy_kind() -> Iterator[TmpfsKind]:
    kind = TmpfsKind()
    registry.register_target_kind(kind)
    try:
        yield kind
    finally:
        registry.unregister_target_kind(kind)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_toy_kind_from_the_registry_alone_runs_a_study(
    toy_kind: TmpfsKind, disk_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "toy.toml"
    path.write_text(
        '[campaign]\nname = "toy"\n'
        f'[[target]]\nname = "ram"\nkind = "tmpfs"\ndirectory = "{disk_dir}"\n'
        'tmpfs_size = "200MiB"\nprofile = "stock"\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [1]\nduration = 2\ncount = false\n"
    )
    camp = campaign.load(path)
    assert camp.targets[0].options == {"tmpfs_size": "200MiB"}
    assert registry.target_kind(camp.targets[0]) is toy_kind
    results = tmp_path / "results"
    runner = run_campaign(
        camp, Ui(quiet=True), results=results, store=results / "results.sqlite",
        yes=False, keep=False, study_id=camp.name,
    )  # fmt: skip
    with Store.open(results / "results.sqlite") as st:
        study = st.study(camp.name)
        records = {r.key: r for r in st.runs(camp.name)}
    assert records["ram/tmpfs"].status == "ok"
    assert records["ram/tmpfs"].result == {
        "mountpoint": str(disk_dir / "pgrig-tmpfs-ram"),
        "fstype": "tmpfs",
        "size_bytes": 200 * 2**20,
    }
    run = records["ram/tpcb/s1/select-only/c1/d2/r1"]
    assert run.status == "ok" and run.result is not None and run.result["tps"] > 0
    # The server ran on the tmpfs: its data directory was there when it was captured.
    assert study.environment is not None and study.environment.postgres is not None
    data = study.environment.postgres.data_directory
    assert data is not None and data.startswith(str(disk_dir / "pgrig-tmpfs-ram") + "/")
    assert [f.fstype for f in study.environment.filesystems] == ["tmpfs"]
    assert runner.targets[0].kind is toy_kind
    assert study.params["targets"][0]["kind"] == "tmpfs"
    md, _ = write_report(study, list(records.values()), tmp_path / "report")
    report = md.read_text()
    assert "## tmpfs targets" in report
    assert "| ram | tmpfs | 200 MiB |" in report
    assert "(tmpfs of 200MiB)" in report, "the kind's description of the target"
    assert not (disk_dir / "pgrig-tmpfs-ram").exists(), "unmounted and removed after"


def test_a_kind_that_is_not_registered_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "x"\n[[target]]\nname = "a"\nkind = "zram"\n')
    with pytest.raises(Exception, match="'zram' is not a target kind") as caught:
        campaign.load(path)
    assert "directory" in (getattr(caught.value, "hint", "") or "")


def test_builtin_kinds_are_chosen_by_their_keys(tmp_path: Path) -> None:
    base = '[campaign]\nname = "x"\n[[target]]\nname = "a"\n'
    cases = {
        f'directory = "{tmp_path}"\n': "directory",
        'dsn = "host=/tmp"\n': "server",
        f'fs = "xfs"\nsize = "1GiB"\nbase = "{tmp_path}"\n': "lab",
    }
    for keys, kind in cases.items():
        path = tmp_path / "c.toml"
        path.write_text(base + keys)
        (spec,) = campaign.load(path).targets
        assert registry.target_kind(spec).name == kind
        assert registry.target_kind(spec, "durability").name == (
            "server" if kind == "server" else "lossy"
        ), "a power-loss workload puts every cluster on the lossy filesystem"
    path.write_text(base + 'kind = "server"\n' + f'directory = "{tmp_path}"\n')
    with pytest.raises(Exception, match="chosen by its keys"):
        campaign.load(path)
    # "directory" claims anything: named beside a dsn it took the target, dropped the
    # dsn in silence, and failed an assertion once the study ran
    path.write_text(base + 'kind = "directory"\ndsn = "host=/tmp"\n')
    with pytest.raises(Exception, match="its keys say 'server'"):
        campaign.load(path)
    path.write_text(base + 'kind = "directory"\n')
    with pytest.raises(Exception, match="needs a directory, a dsn or fs"):
        campaign.load(path)
    path.write_text(base + 'kind = "directory"\n' + f'directory = "{tmp_path}"\n')
    (spec,) = campaign.load(path).targets
    assert registry.target_kind(spec).name == "directory"


@pytest.mark.parametrize("module", ["lifecycle.py", "runner.py", "recorder.py"])
def test_the_core_never_names_a_kind(module: str) -> None:
    """The core asks the interface: no branch on dsn, lab or lossy is left there."""
    source = (Path(lifecycle.__file__).parent / module).read_text()
    for word in (r"\bdsn\b", r"\.lab\b", "lossy", "LabSpec", r"Cluster\("):
        assert not re.search(word, source), (module, word)
