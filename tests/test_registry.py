"""The plug-in registry: pgrig's own parts come in through the same entry
points a third-party package uses, in a set order; a part is added and taken
away whole; a name is registered once."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

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


def _toy_variant(**attrs: object) -> object:
    """A toy workload with some of its attributes changed (a plug-in's mistake)."""
    return type("Variant", (type(TOY),), attrs)()


def test_a_workload_without_a_schema_is_refused_when_it_registers() -> None:
    bad = _toy_variant(type="noschema", schema=None, actions={"noschema.sum": lambda: None})
    with pytest.raises(PgrigError) as refused:
        registry.add_plugin(bad, "tests:NOSCHEMA", "noschema-plugin")
    text = str(refused.value)
    assert "noschema-plugin (tests:NOSCHEMA)" in text and "no schema" in text
    assert "noschema" not in registry.workloads()
    assert "noschema.sum" not in registry.actions()


def test_a_clash_leaves_nothing_of_the_plugin_registered() -> None:
    """Its own action registers first, then one in tpcb's namespace clashes:
    neither the workload nor its first action stays (it did before)."""
    own = lambda rows: None  # noqa: E731
    clash = _toy_variant(type="clash", actions={"clash.sum": own, "tpcb.load": own})
    with pytest.raises(PgrigError, match=r"clash-plugin .*namespace 'tpcb'.* plug-in tpcb"):
        registry.add_plugin(clash, "tests:CLASH", "clash-plugin")
    assert "clash" not in registry.workloads()
    assert "clash.sum" not in registry.actions()
    assert registry.actions()["tpcb.load"] is not own


def test_parts_are_all_checked_before_any_registers() -> None:
    """A ``Parts`` whose last part is bad: refused in the words that part's
    ``register_*`` uses, and none of its good parts before it registered."""
    good = lambda: None  # noqa: E731
    bad = registry.Parts(actions=(("partial.good", good),), executors=(("notone", int),))
    with pytest.raises(PgrigError) as refused:
        registry.add_plugin(bad, "tests:PARTIAL", "partial-plugin")
    text = str(refused.value)
    assert "partial-plugin (tests:PARTIAL)" in text
    assert "host executor 'notone': it is not a subclass of Executor" in text
    assert "partial.good" not in registry.actions() and "notone" not in registry.executors()


def test_parts_are_checked_as_they_register() -> None:
    with pytest.raises(PgrigError, match="not NAMESPACE.verb"):
        registry.register_action("flat", lambda: None)
    with pytest.raises(PgrigError, match="not a function"):
        registry.register_rule("not-a-rule", "a string")  # type: ignore[arg-type]
    with pytest.raises(PgrigError, match="result kind named 'pgbench_run' is registered already"):
        registry.register(_toy_variant(type="twin", kinds=(_pgbench_run_impostor(),)))
    assert "twin" not in registry.workloads()


def _pgbench_run_impostor() -> object:
    from pgrig.results import PgbenchRun, ResultKind

    return ResultKind("pgbench_run", PgbenchRun)


def test_plugins_are_listed_with_what_they_registered_and_cannot_be_disabled_late() -> None:
    tpcb = next(p for p in registry.plugins() if p.name == "tpcb")
    assert tpcb.dist.startswith("pgrig ") and tpcb.value.endswith(":WORKLOAD")
    assert ("workload", "tpcb") in tpcb.parts and ("step action", "tpcb.load") in tpcb.parts
    with pytest.raises(PgrigError, match="loaded already"):
        registry.disable("tpcc", "a test")


def test_disabling_a_plugin_that_is_not_installed_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "-p", "no:nothing", "plugins"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no plug-in named nothing is installed" in done.stderr and "-p no:nothing" in done.stderr
    assert "hint: pgrig plugins lists the installed ones: " in done.stderr
