"""The plug-in registry: pgrig's own parts come in through the same entry
points a third-party package uses, in a set order; a part is added and taken
away whole; a name is registered once."""

from __future__ import annotations

import importlib.metadata

import click
import pytest

from pgrig import registry
from pgrig.errors import PgrigError
from toy.workload import WORKLOAD as TOY


def test_pgrigs_own_parts_come_from_its_entry_points() -> None:
    declared = {
        ep.name for ep in importlib.metadata.entry_points(group=registry.GROUP)
        if ep.dist is not None and ep.dist.name == "pgrig"
    }  # fmt: skip
    assert {"tpcb", "durability", "remote", "directory", "probes", "hosts"} <= declared
    assert list(registry.workloads()) == ["tpcb", "custom", "tpcc", "durability", "basebackup"]
    # without kind = ..., the first kind that claims a target takes it: this order
    assert list(registry.target_kinds()) == ["remote", "lossy", "server", "lab", "directory"]
    assert {"pg_test_fsync", "monitor", "storage_lab", "pgbench_run"} <= set(registry.kinds())
    assert set(registry.executors()) == {"local", "ssh"}
    assert "durability.check" in registry.actions()
    assert any(rule.__name__ == "durable" for rule in registry.rules())


def test_a_workload_comes_and_goes_with_its_actions() -> None:
    registry.register(TOY)
    try:
        assert registry.workloads()["toy"] is TOY
        assert "toy.sum" in registry.actions()
        with pytest.raises(PgrigError, match="registered already"):
            registry.register(type(TOY)())
    finally:
        registry.unregister(TOY)
    assert "toy" not in registry.workloads() and "toy.sum" not in registry.actions()


def test_an_entry_point_may_name_a_command() -> None:
    @click.command("toy-command")
    def toy_command() -> None:
        raise AssertionError("registering a command does not run it")

    registry.add_plugin(toy_command, "tests:toy_command")
    try:
        assert registry.commands()["toy-command"] is toy_command
    finally:
        registry.unregister_command(toy_command)
    with pytest.raises(PgrigError, match="register"):
        registry.add_plugin(42, "tests:forty_two")
