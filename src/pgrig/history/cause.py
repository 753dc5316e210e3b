"""What differs between the two studies around a change: PostgreSQL and tool
versions, kernel, settings, profile, hardware, filesystem and mount options,
and runs the monitor saw disturbed. Read from each study's stored environment
(the target's server where the campaign had several)."""

from __future__ import annotations

from collections.abc import Mapping

from pgrig.history.series import Observation
from pgrig.results import Environment, Study

# Settings naming the study's own work directory or socket: they differ between
# any two studies of a throwaway cluster and explain nothing.
_PER_STUDY = frozenset(
    (
        "config_file",
        "data_directory",
        "external_pid_file",
        "hba_file",
        "ident_file",
        "unix_socket_directories",
    )
)


def _env(study: Study, target: str) -> Environment | None:
    return study.target_environments.get(target) or study.environment


def _facts(study: Study, target: str) -> dict[str, str]:
    """The facts of a study that can explain a change, as 'what -> value'."""
    out: dict[str, str] = {}
    profile = study.params.get("profile")
    if profile is not None:
        out["profile"] = str(profile)
    env = _env(study, target)
    if env is None:
        return out
    out["host"] = env.hostname
    out["kernel"] = env.kernel
    out["OS"] = env.os_release
    out["CPU"] = f"{env.cpu.model} ({env.cpu.logical_cpus} logical)"
    out["memory"] = f"{env.memory_bytes / 2**30:.1f} GiB"
    for disk in env.disks:
        out[f"disk {disk.name}"] = f"{disk.model or '?'}, scheduler {disk.scheduler}"
    for fs in env.filesystems:
        out[f"filesystem of {fs.path}"] = f"{fs.fstype} on {fs.device} ({fs.options})"
    for tool, version in env.tools.items():
        out[f"{tool} version"] = version
    if env.postgres is not None:
        out["PostgreSQL"] = env.postgres.provenance()
        for name, value in env.postgres.settings.items():
            if name not in _PER_STUDY:
                out[f"setting {name}"] = value
    return out


def _diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    out = []
    for what in sorted({*before, *after}):
        b, a = before.get(what, "(not set)"), after.get(what, "(not set)")
        if b != a:
            out.append(f"{what}: {b} -> {a}")
    return out


def differences(
    before: Study, after: Study, target: str, seen: tuple[Observation, Observation]
) -> list[str]:
    """Each fact that differs from ``before`` to ``after`` ('setting shared_buffers:
    128MB -> 16MB'), then the disturbed runs of either study."""
    out = _diff(_facts(before, target), _facts(after, target))
    for study, obs in zip((before, after), seen, strict=True):
        if obs.disturbed:
            out.append(f"{study.id}: {obs.disturbed} of {len(obs.values)} runs disturbed")
    return out
