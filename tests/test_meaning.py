"""The settings that change what a number means (pgrig.meaning): pure functions."""

from __future__ import annotations

from pgrig.cluster import profiles
from pgrig.meaning import Meaning


def test_absent_settings_are_postgresqls_defaults() -> None:
    m = Meaning.of({"shared_buffers": "1GB", "work_mem": "8MB"}, "stock")
    assert m.line() == (
        "profile stock: synchronous_commit=on, fsync=on, full_page_writes=on, shared_buffers=1GB"
    )
    assert m.defaulted == ("synchronous_commit", "fsync", "full_page_writes")
    assert m.caveats() == [] and m.writes_note() == ""


def test_the_oltp_profile_commits_asynchronously() -> None:
    oltp = profiles.load("oltp")
    m = Meaning.of(oltp.settings, oltp.name)
    assert m.settings["synchronous_commit"] == "off"
    assert m.writes_note() == "synchronous_commit=off"
    (caveat,) = m.caveats()
    assert caveat.startswith("synchronous_commit=off: commits return before their WAL is flushed")


def test_every_unsafe_setting_is_named_and_an_existing_server_says_so() -> None:
    m = Meaning.of({"fsync": "off", "full_page_writes": "OFF", "synchronous_commit": "local"}, None)
    assert m.line().startswith("existing server: synchronous_commit=local, fsync=off")
    assert m.writes_note() == "fsync=off, full_page_writes=OFF"
    assert [c.split(":")[0] for c in m.caveats()] == ["fsync=off", "full_page_writes=OFF"]
