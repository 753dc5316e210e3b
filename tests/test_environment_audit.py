"""pgrig audit: findings read this machine; --apply and --restore change one harmless
sysctl for real (fs.aio-max-nr: a ceiling on async I/O requests, raised only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pgrig.environment import audit
from pgrig.errors import PgrigError
from pgrig.storage.cli import EXIT_DIFFERS, storage
from pgrig.storage.cli import audit as audit_cmd

HARMLESS = "fs.aio-max-nr"
AIO = Path("/proc/sys/fs/aio-max-nr")


def invoke(args: list[str]) -> tuple[int, str]:
    """Run the command as pgrig's main does: PgrigError -> its exit code."""
    runner = CliRunner()
    result = runner.invoke(audit_cmd, args)
    if isinstance(result.exception, PgrigError):
        return result.exception.exit_code, result.output + str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_findings_are_typed_and_explained(tmp_path: Path) -> None:
    found = audit.findings([tmp_path])
    names = {f.name for f in found}
    assert {
        "vm.dirty_background_bytes",
        "vm.dirty_ratio",
        "kernel.sem",
        "fs.nr_open",
        "net.core.somaxconn",
        "limit.nofile",
        "transparent_hugepage/enabled",
        "clocksource",
        f"mount {tmp_path}",
    } <= names
    for f in found:
        assert f.why and f.how and f.recommended
        assert f.status in ("ok", "differs", "n/a")
    aio = next(f for f in found if f.name == HARMLESS)
    assert aio.current == AIO.read_text().strip()
    assert aio.ok == (int(aio.current) >= 1048576)
    limits = [f for f in found if f.kind == "limit"]
    assert limits and not any(f.appliable for f in limits)  # never changed at run time


def test_audit_exit_code_says_whether_settings_differ() -> None:
    code, output = invoke(["--format", "json"])
    rows = json.loads(output[: output.rindex("]") + 1])
    differ = [r for r in rows if r["status"] == "differs"]
    assert code == (EXIT_DIFFERS if differ else 0)
    if differ:
        assert f"{len(differ)} of {len(rows)} settings differ" in output


@pytest.mark.skipif(os.geteuid() != 0, reason="writing sysctls needs root")
def test_apply_then_restore_a_harmless_sysctl() -> None:
    original = AIO.read_text().strip()
    if int(original) >= 1048576:
        pytest.skip(f"{HARMLESS} is already {original}: nothing to apply")
    try:
        code, output = invoke(["--apply", "--only", HARMLESS])
        assert code == 0, output
        assert AIO.read_text().strip() == "1048576"
        saved = json.loads(audit.saved_path().read_text())
        assert saved == {HARMLESS: {"value": original, "path": str(AIO)}}
        # A second apply must not overwrite the original with the applied value.
        assert audit.apply([HARMLESS]) == []
        assert json.loads(audit.saved_path().read_text())[HARMLESS]["value"] == original
        code, output = invoke(["--restore"])
        assert code == 0, output
        assert AIO.read_text().strip() == original
        assert not audit.saved_path().exists()
        code, output = invoke(["--restore"])
        assert code == 0 and "nothing to restore" in output
    finally:
        AIO.write_text(original)
        audit.saved_path().unlink(missing_ok=True)


def test_apply_refuses_unknown_names_and_lone_only() -> None:
    code, output = invoke(["--apply", "--only", "vm.no_such_knob"])
    assert code == 2 and "vm.no_such_knob" in output
    code, _ = invoke(["--only", HARMLESS])
    assert code == 2


def test_storage_group_prints_essd_presets_and_cleans() -> None:
    runner = CliRunner()
    result = runner.invoke(storage, ["essd", "PL1", "100"])
    assert result.exit_code == 0
    assert result.output.strip() == (
        "ESSD PL1 100 GiB: 6,800 IOPS, 170.0 MB/s (read and write each)"
    )
    result = runner.invoke(storage, ["clean"])
    assert result.exit_code == 0 and "no storage-lab leftovers" in result.output
