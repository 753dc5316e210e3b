"""bench/routes.py, the tracer docs/architecture.md's routes come from: its counts
on a sequence made by hand, and the report route traced for real (a stored
golden study, a few seconds)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "routes.py"


def routes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("routes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["routes"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_counts_of_a_sequence_made_by_hand() -> None:
    r = routes()
    layer = {"pgrig.report": 2, "pgrig.document": 1, "pgrig.registry": 1}

    def call(caller: str | None, callee: str, line: int = 1) -> object:
        site = (f"{caller}.f", line) if caller else None
        return r.Call(caller, site, callee, "f", f"{callee}.py:1")

    calls = [
        call(None, "pgrig.report.view"),
        call("pgrig.report.view", "pgrig.report.view"),  # same module: the same stay
        call("pgrig.report.view", "pgrig.report.answer"),  # same room, another module
        call("pgrig.report.answer", "pgrig.document.fmt"),  # down
        call("pgrig.report.answer", "pgrig.report.answer", 2),  # back up: a return
        call("pgrig.report.answer", "pgrig.registry"),  # down
        call("pgrig.registry", "pgrig.report.monitor"),  # a climb: a registered section
        call("pgrig.report.answer", "pgrig.document.fmt", 3),  # the room left before
    ]
    c = r.count(calls, layer)
    assert c.stays == 7  # view, answer, fmt, answer, registry, monitor, fmt
    assert c.rooms == 3
    assert c.room_entries == 6  # report, document, report, registry, report, document
    assert c.returns == 3
    assert c.ups == 2 and c.climbs == 1
    assert dict(c.returned) == {"pgrig.report": 3, "pgrig.document": 2}
    # Followed once per call site: the second call from the same line is dropped.
    assert len(r.walked([*calls, calls[3]])) == len(calls)


def test_the_report_route_reaches_the_answer_along_a_chain_entering_each_room_once(
    tmp_path: Path,
) -> None:
    out = tmp_path / "trace.json"
    done = subprocess.run(
        [sys.executable, SCRIPT, "--child", "report", "--json", out, "--study", "tiny_cloud"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["stopped"] and data["exit"] == 0
    spine = [(m, f) for m, f, _ in data["spine"]]
    assert spine[0] == ("pgrig.cli", "main")
    assert spine[-1] == ("pgrig.report.answer", "section")
    r = routes()
    rooms = r.collapse([r.room(m) for m, _ in spine])
    assert len(rooms) == len(set(rooms)), rooms
