#!/usr/bin/env python3
"""How many modules does a call pass through on pgrig's two main routes? Measured,
not read: each route runs for real under a profiler (``sys.setprofile`` and
``threading.setprofile``: this is Python 3.11) that sees only pgrig's own code.

Routes (issue 43, "Done when"):

run     ``pgrig run CAMPAIGN`` of a remote target (server on h1, pgbench from h2 and
        h3: network namespaces with sshd, tests/hosts_fixture.py), from ``cli.main``
        until the first measured pgbench process starts on a load host (the first
        ``load._expect(..., "started")`` returns: the load host's waiter has
        ``exec``ed pgbench). The run then finishes untraced (its cleanup too).
report  ``pgrig report`` of a stored study (tests/data/report/, the studies the golden
        tests use, written into a fresh SQLite store first, untraced), from
        ``cli.main`` until the answer section exists (``report.answer.section``
        returns; ``--report-end pgrig.report.view:build``: until the whole report's
        view, every section, is built).

Counted, on the sequence of pgrig calls in the order they happen (a thread pgrig
starts is spliced in where it was started, as if called there):

stays    entries into a module: consecutive calls into one module collapse into one
rooms    distinct rooms, a room being what shared/tools/structure.py calls one: a
         top-level module or package of src/pgrig
returns  entries into a room already left earlier on the route
ups      steps from a stay in a lower layer to the next stay in a higher one: back up
         after a call down has returned, or a climb
climbs   calls from a room of a lower layer into one of a higher layer. The layers
         are the import graph's: a room that imports no other room is layer 0, any
         other is 1 + the highest layer it imports (the graph structure.py draws,
         imports inside functions and TYPE_CHECKING blocks included); so a climb is
         a call against the imports' direction (a callback, a registered plug-in,
         an object handed down)

Two walks of the same trace: ``walk`` follows each call site once (a call from
the same line of the same function to the same function is not followed again:
a poll loop, the records of a study or a second load host add nothing, as when
the code is read), ``every`` counts every call as it happened. Generator resumes
are not calls, comprehensions are part of the function they are written in
(Python 3.12 inlines them: PEP 709), and what runs while a module is imported
(its body, its class bodies, what they call) is not on the route: it runs once
per process, wherever the first import happens.

Each trace runs with a fresh state directory of its own (``PGRIG_STATE_DIR``):
the route of a machine where pgrig left nothing, so the walk does not move with
what other runs left in the machine's (with leftovers to clean, the run route's
start takes 3-8 more stays per kind that finds some).

Usage (from the repository root, as root for the namespaces):

    .venv/bin/python bench/routes.py [--route run|report|both] [--show] [--study NAME]
    .venv/bin/python bench/routes.py --src /tmp/arch-old/src     # another checkout

``--src`` runs the routes against another tree's ``src/`` (PYTHONPATH), with that
tree's pyproject entry points (the plug-ins it registers) put first on the path.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent.parent
DATA = HERE / "tests" / "data" / "report"
REPORT_END = "pgrig.report.answer:section"  # the report route's end: the answer exists
LANE = "_pgrig_routes_lane"  # set on each Thread object the trace sees
OPTIMIZED = 0x1  # CO_OPTIMIZED: a function's code, not a module's or a class body's
INLINE = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
GENERATOR = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


# -- rooms and layers, as shared/tools/structure.py counts them --------------------


def module_name(src: Path, f: Path) -> str:
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def layers(src: Path) -> dict[str, int]:
    """Each room's layer: 0 for a room importing no other, else 1 + the highest it imports."""
    files = {module_name(src, f): f for f in (src / "pgrig").rglob("*.py")}
    graph: dict[str, set[str]] = {room(m): set() for m in files}
    for m, f in files.items():
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for n in ast.walk(ast.parse(f.read_text())):
            targets: list[str] = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in n.names]
            for t in targets:
                if t in files and t != m and not m.startswith(t + ".") and room(t) != room(m):
                    graph[room(m)].add(room(t))
    layer: dict[str, int] = {}
    busy: set[str] = set()

    def height(r: str) -> int:
        if r not in layer:
            busy.add(r)  # an edge inside a loop (structure.py: none) is not followed
            layer[r] = 1 + max((height(t) for t in graph[r] if t not in busy), default=-1)
            busy.discard(r)
        return layer[r]

    for r in graph:
        height(r)
    return layer


# -- the tracer ----------------------------------------------------------------------


def importing(frame: FrameType | None) -> bool:
    """Is a module being imported below ``frame`` (this script's own aside)?"""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") != "__main__":
            return True
        frame = frame.f_back
    return False


@dataclass(frozen=True)
class Call:
    caller: str | None  # module of the nearest pgrig frame below (None: a thread's first)
    site: tuple[str, int] | None  # caller's qualified name and line
    callee: str
    function: str
    code: object  # the called function's code here; its "file:line" once read back
    path: tuple[str, ...] = ()  # "module:function" of the pgrig frames below, outermost first


@dataclass
class Tracer:
    """The pgrig calls of every thread, each thread in a lane of its own; a lane is
    spliced into its parent's where ``Thread.start`` was called (lanes are numbered
    on the Thread objects: thread idents and object ids are reused)."""

    src: str
    stop_module: str
    stop_function: str
    stop_word: str | None = None
    stopped: bool = False
    lanes: dict[int, list[Call | int]] = field(default_factory=dict)  # an int: a child lane
    caller_of: dict[int, str | None] = field(default_factory=dict)  # lane -> who started it
    names: dict[str, str | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_lane: int = 1  # 0: the thread that installed the tracer
    spine: list[tuple[str, str, int]] = field(default_factory=list)  # the stack at the end
    path_of: dict[int, tuple[str, ...]] = field(default_factory=dict)  # lane -> its starter's

    def module(self, filename: str) -> str | None:
        if filename not in self.names:
            if filename.startswith(self.src) and filename.endswith(".py"):
                self.names[filename] = module_name(Path(self.src).parent, Path(filename))
            else:
                self.names[filename] = None
        return self.names[filename]

    def pgrig_below(self, frame: FrameType | None) -> FrameType | None:
        while frame is not None and self.module(frame.f_code.co_filename) is None:
            frame = frame.f_back
        return frame

    def path(self, frame: FrameType | None) -> tuple[str, ...]:
        out = []
        while frame is not None:
            if (m := self.module(frame.f_code.co_filename)) is not None:
                out.append(f"{m}:{frame.f_code.co_qualname}")
            frame = frame.f_back
        return tuple(reversed(out))

    def lane(self) -> int:
        me = threading.current_thread()
        lane = getattr(me, LANE, None)
        if lane is None:  # a thread started before the trace (or not by Thread.start)
            with self.lock:
                lane, self.next_lane = self.next_lane, self.next_lane + 1
            setattr(me, LANE, lane)
        return int(lane)

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if self.stopped:
            sys.setprofile(None)
            return
        if event not in ("call", "return"):
            return
        code = frame.f_code
        mod = self.module(code.co_filename)
        if mod is None:
            if event == "call" and code is threading.Thread.start.__code__:
                child = frame.f_locals.get("self")
                below = self.pgrig_below(frame.f_back)
                parent = self.lane()
                with self.lock:
                    lane, self.next_lane = self.next_lane, self.next_lane + 1
                    setattr(child, LANE, lane)
                    self.lanes.setdefault(parent, []).append(lane)
                    self.caller_of[lane] = self.module(below.f_code.co_filename) if below else None
                    self.path_of[lane] = self.path_of.get(parent, ()) + self.path(frame.f_back)
            return
        if event == "return":
            if (
                mod == self.stop_module
                and code.co_name == self.stop_function
                and (self.stop_word is None or frame.f_locals.get("word") == self.stop_word)
            ):
                self.stopped = True
                at: FrameType | None = frame
                while at is not None:  # the route itself: the pgrig frames below the end
                    if (m := self.module(at.f_code.co_filename)) is not None:
                        self.spine.insert(0, (m, at.f_code.co_qualname, at.f_lineno))
                    at = at.f_back
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
            return
        if code.co_flags & GENERATOR and frame.f_lasti > 0:
            return  # a generator resumed, not called
        if code.co_name in INLINE:
            return  # part of the function it is written in (inlined from Python 3.12)
        if not code.co_flags & OPTIMIZED or importing(frame):
            return  # a module or class body, or what runs while one is imported
        lane = self.lane()
        below = self.pgrig_below(frame.f_back)
        if below is not None:
            caller = self.module(below.f_code.co_filename)
            site: tuple[str, int] | None = (f"{caller}.{below.f_code.co_qualname}", below.f_lineno)
        else:  # a thread's first pgrig call: called from where the thread was started
            caller, site = self.caller_of.get(lane), None
        with self.lock:
            path = self.path_of.get(lane, ()) + self.path(frame.f_back)
            self.lanes.setdefault(lane, []).append(
                Call(caller, site, mod, code.co_qualname, code, path)
            )

    def sequence(self) -> list[Call]:
        """The calls in order, each thread spliced in where it was started."""
        out: list[Call] = []

        def walk(lane: int) -> None:
            for item in self.lanes.get(lane, []):
                if isinstance(item, Call):
                    out.append(item)
                else:
                    walk(item)

        walk(0)
        return out

    def install(self) -> None:
        setattr(threading.current_thread(), LANE, 0)
        threading.setprofile(self)  # type: ignore[arg-type]
        sys.setprofile(self)  # type: ignore[arg-type]


# -- the counts ----------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    calls: int
    stays: int
    rooms: int
    room_entries: int
    returns: int
    climbs: int
    ups: int
    returned: tuple[tuple[str, int], ...]  # rooms entered more than once, and how often


def walked(calls: list[Call]) -> list[Call]:
    """Each call site followed once: (calling function and line, called code)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for c in calls:
        key = (c.site, c.caller, c.callee, c.function, c.code)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def collapse(items: list[str]) -> list[str]:
    return [x for i, x in enumerate(items) if i == 0 or items[i - 1] != x]


def count(calls: list[Call], layer: dict[str, int]) -> Counts:
    stays = collapse([c.callee for c in calls])
    height = [layer.get(room(m), 0) for m in stays]
    entries = collapse([room(m) for m in stays])
    seen = Counter(entries)
    climbs = sum(
        1
        for c in calls
        if c.caller is not None
        and room(c.caller) != room(c.callee)
        and layer.get(room(c.caller), 0) < layer.get(room(c.callee), 0)
    )
    return Counts(
        calls=len(calls),
        stays=len(stays),
        rooms=len(seen),
        room_entries=len(entries),
        returns=len(entries) - len(seen),
        climbs=climbs,
        ups=sum(1 for a, b in zip(height, height[1:], strict=False) if a < b),
        returned=tuple((r, n) for r, n in seen.most_common() if n > 1),
    )


def side_trips(
    calls: list[Call], spine: list[tuple[str, str, int]]
) -> list[tuple[str, int, list[str]]]:
    """Each call given to the deepest frame of the end's stack it runs under: per
    frame, the stays of the calls it made off the route and the rooms they entered."""
    route = [f"{m}:{f}" for m, f, _ in spine]
    under: dict[int, list[Call]] = {}
    for c in calls:
        here = c.path + (f"{c.callee}:{c.function}",)
        k = 0
        while k < min(len(here), len(route)) and here[k] == route[k]:
            k += 1
        if k < len(here):  # not a frame of the route itself
            under.setdefault(k - 1, []).append(c)
    out = []
    for i, (m, f, _) in enumerate(spine):
        trips = under.get(i, [])
        rooms = list(dict.fromkeys(room(c.callee).removeprefix("pgrig.") for c in trips))
        out.append((f"{m}.{f}", len(collapse([c.callee for c in trips])), rooms))
    return out


def reentries(calls: list[Call]) -> dict[tuple[str, str], list[str]]:
    """The calls that entered a room already left, by (calling room, entered room):
    the calling functions, one per call."""
    left: set[str] = set()
    current: str | None = None
    out: dict[tuple[str, str], list[str]] = {}
    for c in calls:
        r = room(c.callee)
        if r == current:
            continue
        if r in left:
            site = c.site[0] if c.site else f"{c.caller} (a thread's start)"
            key = (room(c.caller) if c.caller else "?", r)
            out.setdefault(key, []).append(f"{site} -> {c.callee}.{c.function}")
        if current is not None:
            left.add(current)
        current = r
    return out


def show(calls: list[Call], layer: dict[str, int]) -> Iterator[str]:
    """One line per stay: the module, the functions entered there in order, and
    whether the stay climbed (^) and re-entered a room already left (again)."""
    left: set[str] = set()
    current_room: str | None = None
    n = 0
    i = 0
    while i < len(calls):
        first = calls[i]
        j = i
        functions: list[str] = []
        while j < len(calls) and calls[j].callee == first.callee:
            if calls[j].function not in functions:
                functions.append(calls[j].function)
            j += 1
        n += 1
        r = room(first.callee)
        marks = []
        up = first.caller is not None and layer.get(room(first.caller), 0) < layer.get(r, 0)
        if up:
            marks.append("^climb")
        if r != current_room:
            if r in left:
                marks.append("again")
            if current_room is not None:
                left.add(current_room)
            current_room = r
        more = f" +{len(functions) - 4}" if len(functions) > 4 else ""
        yield (
            f"{n:4d} L{layer.get(r, 0):<2d} {first.callee:<34s} "
            f"{', '.join(functions[:4])}{more}  {' '.join(marks)}".rstrip()
        )
        i = j


# -- the routes (run in a child process: the pgrig under test is what it imports) ----


def load_study(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = DATA / f"{name}.json"
    if not path.exists():
        path = DATA / f"{name}_study.json.gz"
        data = json.loads(gzip.decompress(path.read_bytes()))
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
    return data["study"], data["runs"]


def stored(name: str, results: Path) -> str:
    """The study ``name`` written into ``results/results.sqlite`` (not traced)."""
    from pgrig.environment import Environment
    from pgrig.results import RunRecord, Study, from_dict
    from pgrig.store import Store

    study_d, runs = load_study(name)
    study = from_dict(Study, study_d)
    with Store.open(results / "results.sqlite") as st:
        st.begin_study(study)
        for target, env in (study_d.get("target_environments") or {}).items():
            st.set_target_environment(study.id, target, from_dict(Environment, env))
        for r in runs:
            st.record(from_dict(RunRecord, r))
        if study.finished_at:
            st.finish_study(study.id, study.status, study.finished_at)
    return study.id


def remote_campaign(tmp: Path, inventory: str) -> Path:
    """tests/test_remote_target.py's campaign: TPC-B select-only, 2 clients, 1 s."""
    path = tmp / "remote.toml"
    path.write_text(
        f'[campaign]\nname = "routes"\ninventory = "{inventory}"\n'
        f'[[target]]\nname = "db"\nhost = "h1"\nload_hosts = ["h2", "h3"]\n'
        f'directory = "{tmp / "logs"}"\nprofile = "stock"\n'
        '[target.set]\nfsync = "off"\n'
        '[[workload]]\ntype = "tpcb"\nscales = [1]\nmodes = ["select-only"]\n'
        "clients = [2]\nthreads = 1\nduration = [1]\ncount = false\n"
        "[probes]\ntiming = false\nfsync = false\nfio = false\n"
    )
    return path


def child(args: argparse.Namespace) -> int:
    import pgrig
    from pgrig import cli

    src = Path(pgrig.__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="pgrig-routes-") as where:  # the study's files
        tmp = Path(where)
        if args.child == "run":
            argv = ["run", str(remote_campaign(tmp, args.inventory)), "--results", str(tmp / "r")]
            tracer = Tracer(str(src) + os.sep, "pgrig.load", "_expect", "started")
        else:
            sid = stored(args.study, tmp)
            argv = ["report", sid, "--results", str(tmp), "--out", str(tmp / "out")]
            module, function = args.report_end.split(":")
            tracer = Tracer(str(src) + os.sep, module, function)
        tracer.install()
        try:
            cli.main(argv)
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    calls = tracer.sequence()
    out = {
        "exit": code,
        "stopped": tracer.stopped,
        "spine": tracer.spine,
        "calls": [
            {
                "caller": c.caller,
                "site": c.site,
                "callee": c.callee,
                "function": c.function,
                "code": f"{c.code.co_filename}:{c.code.co_firstlineno}",
                "path": c.path,
            }
            for c in calls
        ],
    }
    Path(args.json).write_text(json.dumps(out))
    return 0


def entry_points_first(src: Path, where: Path) -> Path:
    """A dist-info of ``src``'s pyproject entry points in ``where``: first on the path,
    importlib.metadata reads pgrig's plug-ins from it, not from the venv's install."""
    project = tomllib.loads((src.parent / "pyproject.toml").read_text())["project"]
    info = where / "pgrig-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pgrig\nVersion: 0\n")
    lines = []
    for group, eps in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in eps.items()]
    lines.append("[console_scripts]")
    lines += [f"{k} = {v}" for k, v in project.get("scripts", {}).items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return where


@dataclass(frozen=True)
class Traced:
    calls: list[Call]
    stopped: bool
    exit: object
    spine: list[tuple[str, str, int]]


def trace(
    route: str, src: Path, study: str, inventory: str | None, report_end: str = REPORT_END
) -> Traced:
    with tempfile.TemporaryDirectory(prefix="pgrig-routes-") as tmp:
        env = dict(os.environ)
        meta = entry_points_first(src, Path(tmp) / "meta")
        env["PYTHONPATH"] = os.pathsep.join([str(meta), str(src)])
        # pgrig's records of its own (calibrations, leftovers of killed runs) in a
        # state directory of the trace's own: the machine's holds what other runs
        # left, and cleaning it at the start moved the walk by up to 10 stays
        env["PGRIG_STATE_DIR"] = str(Path(tmp) / "state")
        out = Path(tmp) / "trace.json"
        cmd = [sys.executable, __file__, "--child", route, "--json", str(out), "--study", study]
        cmd += ["--report-end", report_end]
        if inventory:
            cmd += ["--inventory", inventory]
        done = subprocess.run(cmd, env=env, timeout=900, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            sys.exit(f"route {route} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        data = json.loads(out.read_text())
    calls = [
        Call(
            c["caller"],
            tuple(c["site"]) if c["site"] else None,
            c["callee"],
            c["function"],
            c["code"],
            tuple(c["path"]),
        )  # fmt: skip
        for c in data["calls"]
    ]
    return Traced(calls, data["stopped"], data["exit"], [tuple(f) for f in data["spine"]])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--route", choices=("run", "report", "both"), default="both")
    p.add_argument("--src", type=Path, default=HERE / "src", help="the tree whose pgrig runs")
    p.add_argument("--study", default="tiny_cloud", help="a study of tests/data/report")
    p.add_argument("--show", action="store_true", help="print the walk's stays, one a line")
    p.add_argument(
        "--report-end",
        default=REPORT_END,
        help="MODULE:FUNCTION whose first return ends the report route "
        "(pgrig.report.view:build: the whole report, every section)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    p.add_argument("--inventory", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    src = args.src.resolve()
    layer = layers(src)
    routes = ["run", "report"] if args.route == "both" else [args.route]
    rows = []
    for route in routes:
        if route == "run":
            sys.path.insert(0, str(HERE / "tests"))
            from hosts_fixture import make_lab, netns_available

            why = netns_available()
            if why is not None:
                sys.exit(f"route run needs the namespace lab: {why}")
            with make_lab(3) as lab:
                traced = trace(route, src, args.study, str(lab.write_inventory()))
        else:
            traced = trace(route, src, args.study, None, args.report_end)
        if not traced.stopped or traced.exit not in (0, None):
            print(f"warning: route {route}: end point reached {traced.stopped}, exit {traced.exit}")
        walk = walked(traced.calls)
        for name, calls in (("walk", walk), ("every", traced.calls)):
            rows.append((route, name, count(calls, layer)))
        if args.show:
            print(f"\n## route {route}: the walk's stays (L = the room's layer)")
            for line in show(walk, layer):
                print(line)
            print(f"\n## route {route}: the stack at the end point (module, function, line)")
            for m, function, line in traced.spine:
                print(f"L{layer.get(room(m), 0):<2d} {m:<34s} {function} :{line}")
            print(f"\n## route {route}: the side trips from each frame of that stack (walk)")
            for frame, stays, rooms in side_trips(walk, traced.spine):
                print(f"{stays:4d} stays  {frame:<60s} {', '.join(rooms)}")
            print(f"\n## route {route}: re-entries of a room already left, by call (walk)")
            again = sorted(reentries(walk).items(), key=lambda kv: -len(kv[1]))
            for (caller, callee), sites in again[:20]:
                print(f"{len(sites):4d}  {caller} -> {callee}   e.g. {sites[0]}")
            print(f"\n## route {route}: the climbs, by (calling room, called room) (walk)")
            up = Counter(
                (room(c.caller), room(c.callee))
                for c in walk
                if c.caller is not None
                and layer.get(room(c.caller), 0) < layer.get(room(c.callee), 0)
            )
            for (low, high), n in up.most_common(12):
                print(f"{n:4d}  {low} (L{layer.get(low, 0)}) -> {high} (L{layer.get(high, 0)})")
            print(f"\n## route {route}: the most called functions (every call)")
            often = Counter(f"{c.callee}.{c.function}" for c in traced.calls)
            for function, n in often.most_common(12):
                print(f"{n:6d}  {function}")
    print(f"\nsrc {src}")
    print("route  walk   calls  stays rooms entries returns  ups climbs  most re-entered rooms")
    for route, name, c in rows:
        top = ", ".join(f"{r.removeprefix('pgrig.')} {n}" for r, n in c.returned[:4])
        print(
            f"{route:<6s} {name:<5s} {c.calls:>6d} {c.stays:>6d} {c.rooms:>5d} {c.room_entries:>7d}"
            f" {c.returns:>7d} {c.ups:>4d} {c.climbs:>6d}  {top}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
