"""pyinfra's result table, as pyinfra 3.10 printed it here (tests/test_hosts_cli.py
runs it for real), and what `pgrig hosts check` calls missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig.errors import ParseError
from pgrig.hosts.facts import HostFacts
from pgrig.hosts.provision import parse_results

# The first provisioning of two namespace hosts: the packages already there,
# the work directory made.
FIRST_RUN = (Path(__file__).parent / "data" / "pyinfra-3.10-provision.txt").read_text()


def test_result_table_counts_per_operation() -> None:
    ops = parse_results(FIRST_RUN)
    assert [(o.name, o.hosts, o.changed, o.unchanged, o.errors) for o in ops] == [
        ("PostgreSQL 15, pgbench, fio, python3", 2, 0, 2, 0),
        ("pgrig work directory", 2, 2, 0, 0),
    ]


def test_no_table_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="pyinfra printed no results table"):
        parse_results("--> Loading config...\n")


def test_missing_tools_are_named() -> None:
    facts = HostFacts("c1", "root", False, (), None, "fio-3.33", None, 2, 1.0, 10.0)
    assert facts.missing() == ["PostgreSQL", "pgbench", "python"]
    ready = HostFacts("c1", "root", False, ("15",), "pgbench 15", "fio-3.33", "Python 3", 2, 1, 1)
    assert ready.missing() == []
