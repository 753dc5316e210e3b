"""A remote target's initdb locale is asked of the server's host, not of this
machine: `validate.locale_exists` ran `locale -a` here even for a server on db1
(issue 40, left by session 14).

The host is a network namespace with sshd (tests/hosts_fixture.py) that sees a
locale directory of its own: en_US.UTF-8 compiled with localedef for it and
bound over /usr/lib/locale in its sshd's mount namespace, so the host has a
locale this machine lacks - what tells the two questions apart when the
namespaces otherwise share one filesystem."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hosts_fixture import Lab, make_lab, netns_available
from pgrig.store import Store
from test_cli import pgrig

pytestmark = [pytest.mark.cluster]

LOCALES = Path("/usr/lib/locale")
THEIRS = "en_US.UTF-8"  # the host's alone


def listed_here() -> set[str]:
    out = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=30).stdout
    return {line.strip().lower().replace("-", "") for line in out.splitlines()}


@pytest.fixture(scope="module")
def lab_with_a_locale() -> Iterator[Lab]:
    if (why := netns_available()) is not None:
        pytest.skip(why)
    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/en_US").is_file():
        pytest.skip("no localedef or no en_US locale source (Debian: package locales)")
    if "en_us.utf8" in listed_here():
        pytest.skip(f"this machine has {THEIRS}: the host's answer would be the same")
    locales = Path(tempfile.mkdtemp(prefix="pgrig-test-locales-"))
    try:
        locales.chmod(0o755)
        for mine in LOCALES.iterdir():  # the host keeps this machine's (C.utf8) too
            if mine.is_dir():
                shutil.copytree(mine, locales / mine.name)
        subprocess.run(["localedef", "-i", "en_US", "-f", "UTF-8", str(locales / "en_US.utf8")],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        with make_lab(1, binds={str(LOCALES): locales}) as lab:
            yield lab
    finally:
        shutil.rmtree(locales, ignore_errors=True)


def campaign(tmp_path: Path, lab: Lab, locale: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[campaign]\nname = "locale"\ninventory = "{lab.write_inventory()}"\n'
        f'[[target]]\nname = "db"\nhost = "h1"\ndirectory = "{tmp_path / "logs"}"\n'
        f'profile = "stock"\ninitdb = {{ locale = "{locale}", encoding = "UTF8" }}\n'
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [1]\nduration = 1\ncount = false\n"
    )
    return path


def test_the_locale_is_asked_of_the_servers_host(lab_with_a_locale: Lab, tmp_path: Path) -> None:
    assert "en_us.utf8" not in listed_here(), "this machine lacks it: the test tells"
    # the host has it: planned (it read "this machine has no such locale", exit 2)
    planned = pgrig("plan", campaign(tmp_path, lab_with_a_locale, THEIRS))
    assert planned.returncode == 0, planned.stderr
    assert "no such locale" not in planned.stderr

    # a locale neither has: refused before anything exists, the host named
    refused = pgrig("plan", campaign(tmp_path, lab_with_a_locale, "xx_YY.UTF-8"))
    err = " ".join(refused.stderr.split())
    assert refused.returncode == 2, err
    assert "target db: locale 'xx_YY.UTF-8': h1 has no such locale" in err, err
    assert "`locale -a` on h1 lists the others" in err, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"], "nothing created"

    # and the host's initdb takes it: the server on h1 collates in it
    results = tmp_path / "r"
    done = pgrig("run", campaign(tmp_path, lab_with_a_locale, THEIRS), "--results", results)
    assert done.returncode == 0, done.stderr
    with Store.open(results / "results.sqlite") as st:
        (study,) = st.studies()
    server = study.environment.postgres  # its one target's
    assert server is not None and server.settings.get("lc_collate") == THEIRS, server
