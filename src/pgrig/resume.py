"""The study a campaign records into: its id, its parameters, and opening it -
new, or resumed when the same campaign runs again.

A study is resumed only when it is ours and idle (no live pgrig runs it) and
was recorded with the same targets, workloads, policy and baseline: runs of
another campaign are never mixed in. A campaign whose every step is recorded
already is found before anything is built (``all_recorded``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pgrig import __version__, campaign, plan, registry
from pgrig.campaign import Campaign
from pgrig.errors import PgrigError, StudyExists, UsageError, WorkdirError
from pgrig.ownership import owner_alive, process_start_time
from pgrig.recorder import now
from pgrig.registry.target import Target
from pgrig.results import Study
from pgrig.step import Step
from pgrig.store import Store
from pgrig.ui import Ui

# A study's params: what it recorded of its campaign and targets, as JSON.
Params = dict[str, Any]


def new_study_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def study_live(study: Study) -> bool:
    """True while the pgrig that runs the study lives (judged on the machine it
    ran on; a study run from another machine in a shared store is taken at its
    word, as every owner record is: ``ownership.owner_alive``)."""
    pid, start = study.params.get("pid"), study.params.get("pid_start")
    if study.status != "running":
        return False
    if not isinstance(pid, int):  # recorded by an older pgrig: take it at its word
        return True
    controller = study.params.get("controller")
    if not isinstance(controller, str):
        # An older pgrig named no controller: its environment's hostname is the
        # machine pgrig ran on - unless it was captured on a host (a one-target
        # remote study takes its server's, ``env.host`` set), which says nothing
        # of where pgrig ran: judged here then. It took the server's host's
        # name for pgrig's and called a killed study live for ever.
        env, controller = study.environment, socket.gethostname()
        if env is not None and env.host is None:
            controller = env.hostname
    if pid == os.getpid() and controller == socket.gethostname():
        return False
    return owner_alive(pid, controller, start if isinstance(start, int) else None)


def planned_steps(study: Study) -> set[str] | None:
    """The step keys of the study's plan, read from its campaign file if that
    still holds the campaign of this name; None where it is unknown (a quick
    study, a file moved, renamed or no longer valid)."""
    path = study.params.get("campaign_file")
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    try:
        camp = campaign.load(Path(path))
    except PgrigError:
        return None
    return plan.step_ids(camp) if camp.name == study.params.get("campaign") else None


def params(camp: Campaign, targets: list[Target]) -> Params:
    """What the study records of its campaign and targets (``Study.params``)."""
    out: Params = {
        "campaign": camp.name,
        "source": camp.source,
        "baseline": camp.baseline,
        "policy": asdict(camp.policy),
        "pid": os.getpid(),
        # where that PID is judged (``study_live``), and its identity over time
        "controller": socket.gethostname(),
        "pid_start": process_start_time(os.getpid()),
    }
    described = []
    for t in targets:
        info = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(t.spec).items()}
        info.update(t.kind.describe(t))
        if t.profile is not None:  # what the profile file said then: an edit is a change
            info["profile_settings"] = dict(t.profile.settings)
        info["pg_version"] = t.bins.version
        info["pg_bin"] = str(t.bins.bin_dir)
        described.append(info)
    out["targets"] = described
    if Path(camp.source).is_file():  # not a study made on the command line
        # where `pgrig list` finds the plan again, from any directory
        out["campaign_file"] = str(Path(camp.source).resolve())
    if camp.command:  # how it runs again (the summary's "How to run it again")
        out["command"] = list(camp.command)
    if camp.text:
        out["campaign_text"] = camp.text
    if len(targets) == 1:  # the single-target summary the report shows first
        t = targets[0]
        out["profile"] = t.spec.profile
        out["pg_version"] = t.bins.version
    out["workloads"] = [registry.of(w).describe(w) for w in camp.workloads]
    return out


def label(targets: Sequence[Target]) -> str:
    """What a study is "on": its one target's label, or the targets' names."""
    if len(targets) != 1:
        return ", ".join(t.name for t in targets)
    only = targets[0]
    return only.kind.label(only)


def check_resume(old: Study, wanted: Params, store: Store) -> None:
    """Resume only our own, idle study: one another pgrig is running is left
    alone (and never marked failed), and one that measured other targets or
    other parameters never gets runs of this campaign mixed in."""
    pid = old.params.get("pid")
    if study_live(old):
        raise WorkdirError(
            f"study {old.id} in {store.path} is being run by pgrig process {pid}",
            hint="wait for it to finish, or run this one with another --results",
        )
    for key in ("targets", "workloads", "policy", "baseline"):
        before, now_ = _comparable(old.params.get(key)), _comparable(wanted.get(key))
        difference = _first_difference(before, now_)
        if difference is not None:
            raise UsageError(
                f"study {old.id} in {store.path} was recorded with other {key} "
                f"({difference}); resuming it would mix their runs"
                + (f" (it came from {old.params.get('source')})" if key == "targets" else ""),
                hint="give the campaign another name, or pass another --results",
            )


def all_recorded(store: Store, camp: Campaign, sid: str, wanted: Params) -> list[Step]:
    """Every step the campaign expands to (builds, probes, loads, measured runs
    and what follows them: ``plan.steps``, the runner's own order), when each is
    recorded in study ``sid`` already - as a resume would find, any status
    counting as done; the study is then marked finished. Empty when a step is
    missing, or when repeats go on until a confidence interval is met (how many,
    only the recorded runs' figures can say: the resume decides)."""
    if camp.policy.adaptive:
        return []
    if (found := store.find_study(sid)) is None:
        return []
    check_resume(found, wanted, store)  # the resume's refusals
    planned = [step for _view, step in plan.steps(camp)]
    recorded = store.keys(sid)
    if not planned or any(step.id not in recorded for step in planned):
        return []
    if found.status != "finished":  # killed after its last step: now it is
        store.finish_study(sid, "finished", now())
    return planned


def failed_steps(store: Store, camp: Campaign, sid: str) -> list[str]:
    """The campaign's steps recorded as failed in study ``sid`` (a resume does not
    run them again: ``--retry-failed`` does), in the plan's order."""
    if store.find_study(sid) is None:
        return []
    failed = store.keys(sid, status="failed")
    return [step.id for _view, step in plan.steps(camp) if step.id in failed]


def set_aside(store: Store, camp: Campaign, sid: str, keys: list[str]) -> None:
    """The failed steps ``keys`` made ready to run again once: each failed record,
    and what is recorded below it (its monitor), moves to ``KEY/failed-N`` (N: its
    attempt), so that the retry records under ``KEY`` and the failure stays."""
    recorded = store.keys(sid)
    steps = {step.id for _view, step in plan.steps(camp)}
    renames: dict[str, str] = {}
    for key in keys:
        # below it: its own records, never another step's (nor what is below that)
        others = [s for s in steps if s != key and s.startswith(key + "/")]
        earlier = [k for k in recorded if k.startswith(f"{key}/failed-")]
        aside = f"{key}/failed-{1 + sum(1 for k in earlier if '/' not in k[len(key) + 1 :])}"
        for old in recorded:
            theirs = any(old == s or old.startswith(s + "/") for s in others)
            if old == key or (old.startswith(key + "/") and old not in earlier and not theirs):
                renames[old] = aside + old[len(key) :]
    store.rekey(sid, renames)


@dataclass(frozen=True)
class Opened:
    """The study a run records into, and whether it was in the store before
    (``resumed``: its recorded runs are there to read; a new one has none)."""

    study: Study
    resumed: bool


def open_study(
    store: Store,
    camp: Campaign,
    targets: Sequence[Target],
    study_id: str | None,
    found: Study | None,
    wanted: Params,
    ui: Ui,
    *,
    on: str | None = None,
) -> Opened:
    """Begin the study (``study_id``, or a new id), or resume it: ``found`` is
    the study of ``study_id`` as the store held it when the run began (None:
    none then), ``wanted`` its params. A new study is ``on`` what the user
    named, else on its ``targets`` (``label``); a resumed one keeps its own."""
    sid = study_id or new_study_id(camp.name)
    for attempt in range(2, 100):
        if found is not None and study_id is None:  # a new study whose id another pgrig took
            sid, found = f"{new_study_id(camp.name)}-{attempt}", None
            continue
        if found is not None:
            check_resume(found, wanted, store)
            store.set_status(sid, "running")
            planned = plan.step_ids(camp)
            done = len(planned & store.keys(sid))
            ui.info(f"resuming [bold]{sid}[/bold]: {done} of {len(planned)} steps already recorded")
            return Opened(store.study(sid), resumed=True)
        try:
            begun = Study(
                id=sid,
                name=camp.name,
                target=on or label(targets),
                started_at=now(),
                status="running",
                params=wanted,
                pgrig_version=__version__,
            )
            return Opened(store.begin_study(begun), resumed=False)
        except StudyExists:  # begun by another pgrig since we looked: look again
            found = store.find_study(sid)
    return Opened(store.study(sid), resumed=True)


def _comparable(value: Any) -> Any:
    """A params value as the store gives it back (JSON), minus what changes
    between two runs of the same campaign on the same machine."""
    value = json.loads(json.dumps(value, sort_keys=True, default=str))
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                item.pop("adapted", None)
    return value


def _first_difference(before: Any, after: Any, path: str = "") -> str | None:
    """Where two params first differ, for the message (``targets[0].directory:
    '/a' then, '/b' now``); None when they agree. A key only one side has is no
    difference: a newer pgrig records more than the one that began the study."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) & set(after)):
            found = _first_difference(before[key], after[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            found = _first_difference(b, a, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if before == after or before is None:
        return None  # None: a study begun before pgrig recorded this at all
    return f"{path.lstrip('.') or 'value'}: {before!r} then, {after!r} now"
