"""The kinds of knob the kernel-settings audit reads (``pgrig.environment.audit``):
a sysctl, a sysfs file, a resource limit, a block device queue setting, a mount
option - each knowing how to read itself, whether the current value is what the
seeds recommend, why that matters for PostgreSQL and how to make it permanent."""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgrig.environment import sources, storage

SEED_000 = "seed 000 (sysctl.conf, limits.conf, rc.local)"
SEED_002 = "seed 002 (XFS vs ext4)"


@dataclass(frozen=True)
class Finding:
    """One knob as found on this machine."""

    name: str
    kind: str  # sysctl, sysfs, limit, device, mount
    current: str | None  # None: cannot be read here
    recommended: str
    ok: bool | None  # None: not applicable or unknown here
    why: str
    how: str  # how to make it permanent
    source: str
    appliable: bool  # apply() can change it at run time

    @property
    def status(self) -> str:
        return {True: "ok", False: "differs", None: "n/a"}[self.ok]


Accept = Callable[[str], bool]


def equals(value: str) -> Accept:
    return lambda current: current.split() == value.split()


def at_least(value: str) -> Accept:
    """Every whitespace-separated field at least the recommended one (kernel.sem too)."""

    def check(current: str) -> bool:
        have, want = current.split(), value.split()
        try:
            return len(have) == len(want) and all(
                int(h) >= int(w) for h, w in zip(have, want, strict=True)
            )
        except ValueError:
            return False

    return check


def one_of(*values: str) -> Accept:
    return lambda current: current in values


class Knob:
    """A setting: how to read it, what the seeds want, why, and how to set it for good."""

    kind = "knob"
    appliable = False

    def __init__(
        self, name: str, recommended: str, accept: Accept, why: str, source: str = SEED_000
    ) -> None:
        self.name = name
        self.recommended = recommended
        self.accept = accept
        self.why = why
        self.source = source

    def read(self) -> str | None:
        raise NotImplementedError

    def how(self) -> str:
        raise NotImplementedError

    def applicable(self) -> bool:
        return True

    def target_value(self, current: str) -> str:
        """What ``apply`` writes: the recommendation, field-wise no lower than now."""
        have, want = current.split(), self.recommended.split()
        if len(have) == len(want) and all(f.isdigit() for f in [*have, *want]):
            return " ".join(str(max(int(h), int(w))) for h, w in zip(have, want, strict=True))
        return self.recommended

    def write(self, value: str) -> None:
        raise NotImplementedError(f"{self.name} cannot be changed at run time")

    def finding(self) -> Finding:
        current = self.read() if self.applicable() else None
        ok = None if current is None else self.accept(current)
        return Finding(
            self.name,
            self.kind,
            current,
            self.recommended,
            ok,
            self.why,
            self.how(),
            self.source,
            self.appliable,
        )


class FileKnob(Knob):
    """A value in a /proc/sys or /sys file."""

    appliable = True

    def __init__(self, name: str, path: Path, *args: object, **kwargs: object) -> None:
        super().__init__(name, *args, **kwargs)  # type: ignore[arg-type]
        self.path = path

    def read(self) -> str | None:
        text = sources.read_text(self.path)
        return None if text is None else sources.normalize_space(text)

    def applicable(self) -> bool:
        return self.path.exists()

    def write(self, value: str) -> None:
        with open(self.path, "w") as fh:
            fh.write(value)


class Sysctl(FileKnob):
    kind = "sysctl"

    def __init__(self, name: str, *args: object, **kwargs: object) -> None:
        path = Path("/proc/sys") / name.replace(".", "/")
        super().__init__(name, path, *args, **kwargs)

    def how(self) -> str:
        line = f"{self.name} = {self.recommended}"
        return f"echo '{line}' >> /etc/sysctl.d/90-postgresql.conf; sysctl --system"


class Bracketed(FileKnob):
    """A sysfs choice file printed as ``always [madvise] never``."""

    kind = "sysfs"

    def read(self) -> str | None:
        text = sources.read_text(self.path)
        if text is None:
            return None
        return sources.bracketed(text) or sources.normalize_space(text)

    def how(self) -> str:
        return f"echo {self.recommended} > {self.path} at boot (rc.local or a systemd unit)"


class Clocksource(FileKnob):
    kind = "sysfs"

    def applicable(self) -> bool:
        available = sources.read_text(self.path.parent / "available_clocksource") or ""
        return self.path.exists() and self.recommended in available.split()

    def how(self) -> str:
        value = self.recommended
        return f"echo {value} > {self.path}, or clocksource={value} on the kernel command line"


class DeviceKnob(Bracketed):
    """A block device's queue setting (scheduler, read-ahead)."""

    kind = "device"

    def how(self) -> str:
        return f'echo {self.recommended} > {self.path} from a udev rule (ACTION=="add|change")'


class Limit(Knob):
    """A resource limit of this process - the one pgrig's server inherits via pg_ctl."""

    kind = "limit"

    def __init__(self, name: str, which: int, *args: object, **kwargs: object) -> None:
        super().__init__(name, *args, **kwargs)  # type: ignore[arg-type]
        self.which = which

    def read(self) -> str | None:
        soft, hard = resource.getrlimit(self.which)

        def text(v: int) -> str:
            return "unlimited" if v == resource.RLIM_INFINITY else str(v)

        return f"{text(soft)}/{text(hard)}"

    def how(self) -> str:
        item = self.name.removeprefix("limit.")
        value = self.recommended.split("/")[0]
        unit = {"nofile": "NOFILE", "nproc": "NPROC", "memlock": "MEMLOCK", "core": "CORE"}[item]
        return (
            f"'* soft {item} {value}' and '* hard {item} {value}' in /etc/security/limits.conf "
            f"(Limit{unit}={'infinity' if value == 'unlimited' else value} for a systemd service)"
        )


def limit_accept(value: str) -> Accept:
    def check(current: str) -> bool:
        want = value.split("/")[0]
        for have in current.split("/"):
            if want == "unlimited":
                if have != "unlimited":
                    return False
            elif have != "unlimited" and int(have) < int(want):
                return False
        return True

    return check


class MountNoatime(Knob):
    kind = "mount"

    def __init__(self, target: Path) -> None:
        super().__init__(
            f"mount {target}",
            "noatime",
            lambda current: "noatime" in current.split(","),
            "without noatime every read of a data file also writes its inode (atime): "
            "extra writes and journal traffic for read-only queries",
            SEED_002,
        )
        self.target = target
        self.fs = storage.describe_filesystem(target)

    def read(self) -> str | None:
        return self.fs.options if self.fs else None

    def how(self) -> str:
        where = self.fs.mountpoint if self.fs else str(self.target)
        return f"add noatime to the options of {where} in /etc/fstab, then mount -o remount {where}"
