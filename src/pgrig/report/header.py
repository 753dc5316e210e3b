"""The report's header: what the study is, on what, with which tools, and how
its numbers were obtained."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pgrig import stats
from pgrig.monitor.model import MONITOR
from pgrig.report import compare, index
from pgrig.results import (
    SERVER,
    PostgresInfo,
    RunRecord,
    Study,
)


def study_label(study: Study) -> str:
    """'quick (quick-20261122-041500)'; a campaign's study bears its name: once
    ("seed002-filesystems (seed002-filesystems)" headed its report)."""
    return study.name if study.id == study.name else f"{study.name} ({study.id})"


def header(study: Study, records: Sequence[RunRecord]) -> tuple[tuple[str, str], ...]:
    return (
        ("Study", study_label(study)),
        ("Target", _targets_text(study, records)),
        ("Started", study.started_at),
        ("Finished", study.finished_at or "not finished"),
        ("Status", study.status),
        ("pgrig version", study.pgrig_version or "unknown"),
        ("Runs", runs_text(records)),
        ("Statistic", STATISTIC),
        ("How it was obtained", obtained_line(study, records)),
    )


# Said once, at the top: what every headline figure and every "vs" is.
STATISTIC = (
    f"every headline figure is the {stats.HEADLINE} of the repeats (one outlying run moves a "
    "mean of 3, not their median); every 'vs' is decided by one procedure over the runs "
    "(the ratio of their geometric means, its interval and its verdict one computation, the "
    f"study's comparisons decided together): ▲ better / ▼ worse when the interval excludes no "
    f"change, = the same when it lies within ±{stats.MARGIN_PCT:g}%, ? not yet otherwise, with "
    f"the runs that would decide it (from ≥ {stats.MIN_RUNS} runs a side)"
)


def _targets_text(study: Study, records: Sequence[RunRecord]) -> str:
    """A campaign's target names (seed001's "disk", not its directory "/var/tmp")."""
    if not study.params.get("targets"):
        return study.target
    return ", ".join(compare.targets_of(study.params, records)) or study.target


def tool_versions(study: Study, records: Sequence[RunRecord]) -> dict[str, str]:
    """Each tool's version as the records say they ran it; a tool that ran in
    several versions (a server-only build's pgbench is a newer installation's)
    lists each with the targets it drove. The study's environment fills in tools
    no record names."""
    seen: dict[str, dict[str, list[str]]] = {}
    for rec in records:
        for name, version in rec.tool_versions.items():
            if name == SERVER:
                continue
            targets = seen.setdefault(name, {}).setdefault(version, [])
            if rec.target not in targets:
                targets.append(rec.target)
    tools: dict[str, str] = {}
    for name, versions in seen.items():
        if len(versions) == 1:
            tools[name] = next(iter(versions))
        else:
            tools[name] = "; ".join(
                f"{_strip_name(name, v)} ({', '.join(ts)})" for v, ts in versions.items()
            )
    if study.environment is not None:
        for name, version in study.environment.tools.items():
            tools.setdefault(name, version)
    return tools


def _strip_name(name: str, version: str) -> str:
    if version.lower().startswith(name.lower()):
        return version[len(name) :].lstrip(" -") or version
    return version


def tools_text(tools: dict[str, str]) -> str:
    """'fio 3.33, pg_test_fsync/pgbench/psql (PostgreSQL) 15.18': each version
    once, and the tool's name once - ``--version`` prints it too."""
    by_version: dict[str, list[str]] = {}
    for name, version in sorted(tools.items()):
        by_version.setdefault(_strip_name(name, version), []).append(name)
    return ", ".join(f"{'/'.join(names)} {version}" for version, names in by_version.items())


def obtained_line(study: Study, records: Sequence[RunRecord]) -> str:
    tools = tool_versions(study, records)
    parts = []
    if tools:
        parts.append("tools: " + tools_text(tools))
    params = dict(study.params)
    profile = params.pop("profile", None)
    if profile is not None:
        parts.append(f"profile: {profile}")
    for t in params.pop("targets", None) or []:
        if not isinstance(t, dict):
            continue
        where = t.get("where") or t.get("dsn") or t.get("directory") or "storage lab"
        if t.get("storage"):
            where = f"{where} ({t.get('storage')})"
        if t.get("where") and (datadir := _data_directory(study, str(t.get("name")))):
            where = f"{where}, data directory {datadir}"  # a kind's own words: on its host
        settings = t.get("settings") or {}
        extra = (
            f", set {_settings_text(settings, _server_settings(study, str(t.get('name'))))}"
            if (settings and isinstance(settings, dict))
            else (f", set {param_text(settings)}" if settings else "")
        )
        server = "existing server" if t.get("dsn") else f"profile {t.get('profile')}"
        if t.get("listen") == "tcp":
            extra += ", clients over TCP to 127.0.0.1"
        parts.append(
            f"target {t.get('name')}: {where}, PostgreSQL {t.get('pg_version')}, {server}{extra}"
        )
    policy = params.pop("policy", None)
    if isinstance(policy, dict):
        parts.append(
            "runs: "
            + ", ".join(f"{k}={param_text(v)}" for k, v in policy.items() if v not in (None, False))
        )
    for w in params.pop("workloads", None) or []:
        if isinstance(w, dict):
            shown = {k: v for k, v in w.items() if v not in (None, False, 0, "", [], {})}
            name = shown.pop("name", "")
            kind = shown.pop("type", "")
            parts.append(
                f"workload {name} ({kind}): "
                + ", ".join(f"{k}={param_text(v)}" for k, v in shown.items())
            )
    for key in ("pid", "pg_version", "campaign", "baseline", "source", "campaign_file"):
        params.pop(key, None)
    if params:
        parts.append("parameters: " + ", ".join(f"{k}={param_text(v)}" for k, v in params.items()))
    return "; ".join(parts) if parts else "no tool versions or parameters recorded"


def _data_directory(study: Study, target: str) -> str | None:
    """Where the target's server kept its data, as the server said."""
    pg = _server(study, target)
    return pg.data_directory if pg is not None else None


def _server(study: Study, target: str) -> PostgresInfo | None:
    """What the target's server reported of itself; None when not captured."""
    env = study.target_environments.get(target) or (
        study.environment if not study.target_environments else None
    )
    return env.postgres if env is not None else None


def _server_settings(study: Study, target: str) -> dict[str, str] | None:
    pg = _server(study, target)
    return pg.settings if pg is not None else None


def _settings_text(asked: dict[str, Any], reported: dict[str, str] | None) -> str:
    """The settings asked for, as the server reported running them: a value it
    did not apply is marked with what was asked (a campaign's port, or a name
    in other case, was claimed while the server ran something else: issue 40.3)."""
    if reported is None:
        return param_text(asked)
    parts = []
    for name, value in asked.items():
        said = reported.get(str(name).lower())
        if said is None:
            parts.append(f"{name}={value} (not among the server's settings: not applied)")
        elif _same(str(value), said):
            parts.append(f"{name}={said}")
        else:
            parts.append(f"{name}={said} (asked {value}: the server ran {said})")
    return ", ".join(parts)


_UNITS = {
    **{u: 2.0**e for u, e in (("b", 0), ("kb", 10), ("mb", 20), ("gb", 30), ("tb", 40))},
    **{"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0},
}
_WORDS = {"on": "on", "true": "on", "yes": "on", "off": "off", "false": "off", "no": "off"}


def _same(asked: str, reported: str) -> bool:
    """Whether two values of a setting are one (``0.5GB`` and ``512MB``; ``true``
    and ``on``); a bare number against a value with a unit cannot be told from
    the text alone (pages, or the parameter's base unit) and is taken as one."""

    def canonical(text: str) -> tuple[str, float | str]:
        v = text.strip().strip("'").strip().lower()
        m = re.fullmatch(r"(-?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z]*)", v)
        if m and (m.group(2) in _UNITS or not m.group(2)):
            unit = m.group(2)
            kind = (
                ""
                if not unit
                else ("time" if unit in ("us", "ms", "s", "min", "h", "d") else "mem")
            )
            return kind, float(m.group(1)) * _UNITS.get(unit, 1.0)
        return "word", _WORDS.get(v, v)

    (ka, va), (kr, vr) = canonical(asked), canonical(reported)
    if {ka, kr} == {"", "mem"} or {ka, kr} == {"", "time"}:
        return True
    if ka == "" and kr == "word" and va in (0.0, 1.0):  # 1 / 0 as a boolean
        return vr == ("on" if va else "off")
    return ka == kr and (
        abs(float(va) - float(vr)) < 1e-9 * max(1.0, abs(float(va)))
        if isinstance(va, float) and isinstance(vr, float)
        else va == vr
    )


def param_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def runs_text(records: Sequence[RunRecord]) -> str:
    """'17 (16 ok, 1 failed); host and server monitored during 8 of them'."""
    study = index.read(records)
    steps = study.other_than(MONITOR)
    if not steps:
        return "none recorded"
    counts: dict[str, int] = {}
    for rec in steps:
        counts[rec.status] = counts.get(rec.status, 0) + 1
    text = f"{len(steps)} ({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))})"
    watched = len(study.kind(MONITOR))
    return text + (f"; host and server monitored during {watched} of them" if watched else "")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
