"""Golden views: the report of a tiny two-target study (tests/data/report/tiny-cloud.toml:
seed000-cloud's local vs a capped ESSD PL1, and seed001's login script, seconds-long
runs) kept as golden Markdown, and its HTML laid out in headless Chromium at 1,400 px:
no table and no page wider than the window.

The records are real (tiny_cloud.json, from ``pgrig run`` on the dev VM while other
engineers loaded it, which the report says)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from pgrig.report import writer as report
from pgrig.report.monitor import disturbed_summary
from pgrig.results import RunRecord, Study, from_dict

DATA = Path(__file__).parent / "data" / "report"
GOLDEN = DATA / "golden_tiny_cloud.md"
CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1400


def tiny_cloud() -> tuple[Study, list[RunRecord]]:
    data = json.loads((DATA / "tiny_cloud.json").read_text(encoding="utf-8"))
    return from_dict(Study, data["study"]), [from_dict(RunRecord, r) for r in data["runs"]]


def four_targets() -> tuple[Study, list[RunRecord]]:
    """seed000-cloud's four columns (local, essd-pl1, essd-pl3, pl1-small-ram): the
    capped target's real records copied under the two other names, and each on a
    machine of its own (the study's environment under four host names), so the
    comparison opens with seed 000's machine rows. Synthetic copies: they test
    the layout, not the numbers."""
    study, records = tiny_cloud()
    capped = [r for r in records if r.target == "essd-pl1"]
    declared = list(study.params["targets"])
    for name in ("essd-pl3", "pl1-small-ram"):
        records += [
            dataclasses.replace(r, target=name, key=r.key.replace("essd-pl1", name, 1))
            for r in capped
        ]
        declared.append({**declared[1], "name": name})
    assert study.environment is not None
    machines = {
        t["name"]: dataclasses.replace(study.environment, host=f"db{i}", address=f"10.0.0.{i}")
        for i, t in enumerate(declared, 1)
    }
    params = {**study.params, "targets": declared}
    return dataclasses.replace(study, params=params, target_environments=machines), records


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    study, records = tiny_cloud()
    return report.write(study, records, tmp_path_factory.mktemp("golden"), stem="tiny")


def test_tiny_cloud_markdown_matches_golden(written: tuple[Path, Path]) -> None:
    """Set PGRIG_UPDATE_GOLDEN=1 to rewrite the golden file after an intended change."""
    text = written[0].read_text(encoding="utf-8")
    if os.environ.get("PGRIG_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_markdown_opens_with_conclusions_and_holds_no_html_entities(
    written: tuple[Path, Path],
) -> None:
    md = written[0].read_text(encoding="utf-8")
    assert md.splitlines()[0] == "# pgrig report: tiny-cloud"  # not "tiny-cloud (tiny-cloud)"
    sections = re.findall(r"^## (.+)$", md, flags=re.M)
    assert sections[:3] == ["Answer", "Conclusions", "Performance Summary"]
    answer = md[md.index("## Answer") : md.index("## Conclusions")]
    conclusions = md[md.index("## Conclusions") : md.index("## Performance Summary")]
    assert "shared the machine with other work" in conclusions  # after the answer
    assert "essd-pl1 against local: not yet decided at 1, 2 clients" in answer
    assert "essd-pl1 15,958 tps" in answer and "local 11,671 tps" in answer
    assert "faster" not in answer + conclusions  # every difference here is inside the noise
    assert not re.search(r"&(lt|gt|amp|quot);", md)
    assert "\\`" not in md


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=True)


# Every <details> opened, then: the page's width and the captions of tables
# wider than the box they sit in (which would hide columns behind a scrollbar).
PROBE = """<script>
document.querySelectorAll('details').forEach(d => d.open = true);
const wide = [...document.querySelectorAll('table.data')]
  .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
  .map(t => (t.caption ? t.caption.textContent : t.rows[0].textContent).slice(0, 60));
document.title = 'W=' + document.documentElement.scrollWidth + ';WIDE=' + wide.join('|');
</script>"""


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_html_of_four_targets_fits_1400_px(tmp_path: Path) -> None:
    """At 1,400 px seed000's comparison hid essd-pl3 and pl1-small-ram (the key result)
    behind a scrollbar; the per-statement and all-runs tables overflowed too."""
    _, html_path = report.write(*four_targets(), tmp_path / "four", stem="four")
    page = html_path.read_text(encoding="utf-8")
    probe = html_path.with_name("probe.html")
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(
        [f"--window-size={WIDTH},900", "--dump-dom", probe.as_uri()], tmp_path / "p"
    ).stdout
    found = re.search(r"<title>W=(\d+);WIDE=(.*?)</title>", dom, flags=re.S)
    assert found is not None, dom[:500]
    assert int(found.group(1)) <= WIDTH
    assert found.group(2) == "", f"tables wider than the page: {found.group(2)}"
    # The first screen, as a reader sees it: the conclusions and the summary chart.
    shot = tmp_path / "first-screen.png"
    _chromium(
        [f"--window-size={WIDTH},900", f"--screenshot={shot}", html_path.as_uri()],
        tmp_path / "p",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    head = page[: page.index('<section id="summary"')]
    assert '<section id="answer">' in head and "<svg" in head


def test_conclusion_rules_are_documented() -> None:
    """docs/report.md lists every rule with tests that exist."""
    from pgrig.report import conclusions

    docs = (Path(__file__).resolve().parent.parent / "docs" / "report.md").read_text()
    tests = (Path(__file__).parent / "test_conclusions.py").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| ([a-z-]+) \|(.*)$", docs, flags=re.M)}
    for rule in conclusions.RULES:
        name = rule.__name__.replace("_", "-")
        assert name in rows, f"docs/report.md: no row for rule {name}"
        for test in re.findall(r"`(test_[a-z0-9_]+)`", rows[name]):
            assert f"def {test}(" in tests, f"docs/report.md names a missing test {test}"


def test_a_long_header_value_folds_so_conclusions_lead() -> None:
    from pgrig.report import html

    long = "tools: " + "fio 3.33, " * 40
    page = html.render_meta((("Study", "s"), ("How it was obtained", long)))
    assert "<dd>s</dd>" in page
    assert page.count("<details>") == 1 and "<summary>tools: fio 3.33," in page


def test_a_share_of_the_device_below_one_percent_is_not_said_as_0_percent() -> None:
    """seed002's report: "... and up to 0% of the target device's bytes"."""
    _, records = tiny_cloud()
    small = []
    for r in records:
        if r.kind == "monitor" and r.result and r.result.get("disturbed"):
            result = {**r.result, "disturbed": {**r.result["disturbed"], "io_share": 0.003}}
            r = dataclasses.replace(r, result=result)
        small.append(r)
    text = disturbed_summary(small) or ""
    assert "and less than 1% of the target device's bytes" in text and "up to 0%" not in text
