"""The storage probes (pg_test_timing, pg_test_fsync, fio): their result kinds
and step actions."""

from __future__ import annotations

from pgrig import probe, registry


def register() -> None:
    for kind in probe.KINDS:
        registry.register_kind(kind)
    registry.register_action("probe.timing", probe.timing_action)
    registry.register_action("probe.fsync", probe.fsync_action)
    registry.register_action("probe.fio", probe.fio_action)
