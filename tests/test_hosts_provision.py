"""pyinfra's result table, as pyinfra 3.10 printed it here (tests/test_hosts_cli.py
runs it for real), and what `pgrig hosts check` calls missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.errors import ParseError
from pgrig.hosts.facts import HostFacts
from pgrig.hosts.provision import failures, parse_results

# The first provisioning of two namespace hosts: the packages already there,
# the work directory made.
FIRST_RUN = (Path(__file__).parent / "data" / "pyinfra-3.10-provision.txt").read_text()


def test_result_table_counts_per_operation() -> None:
    ops = parse_results(FIRST_RUN)
    assert [(o.name, o.hosts, o.changed, o.unchanged, o.errors) for o in ops] == [
        ("PostgreSQL 15, pgbench, fio, python3", 2, 0, 2, 0),
        ("pgrig work directory", 2, 2, 0, 0),
    ]


def test_failed_operations_are_named_with_what_the_host_said() -> None:
    """pyinfra 3.10 with --no-wait exits 0 when operations fail: captured from a
    deploy whose first operation fails on @local (a shell that exits 3)."""
    output = (Path(__file__).parent / "data" / "pyinfra-3.10-provision-errors.txt").read_text()
    ops = parse_results(output)
    assert [(o.name, o.errors) for o in ops] == [("fails", 1), ("pgrig work directory", 1)]
    said = failures(ops, output)
    assert said.startswith("operations failed: fails (1 of 1 hosts), pgrig work directory")
    assert "[@local] oops [@local] Error: executed 0 commands" in said
    assert failures(parse_results(FIRST_RUN), FIRST_RUN) == ""


def test_no_table_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="pyinfra printed no results table"):
        parse_results("--> Loading config...\n")


def test_missing_tools_are_named() -> None:
    facts = HostFacts("c1", "root", False, (), None, "fio-3.33", None, 2, 1.0, 10.0)
    assert facts.missing() == ["PostgreSQL", "pgbench", "python"]
    ready = HostFacts("c1", "root", False, ("15",), "pgbench 15", "fio-3.33", "Python 3", 2, 1, 1)
    assert ready.missing() == []
