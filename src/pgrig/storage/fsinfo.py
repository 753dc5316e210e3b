"""What the system says about a filesystem target: ``xfs_info``, ``dumpe2fs -h``,
the /proc/self/mountinfo line - parsed into a frozen ``FilesystemInfo``.

The parsers take the tools' text, so tests feed them real captured output
(tests/data/xfs_info_*.txt, dumpe2fs_h_*.txt).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Options that are accepted but never shown in mountinfo, with the reason. An
# asked option missing from the effective list and not explained here is reported.
IMPLIED: dict[str, str] = {
    "defaults": "the default set, not an option",
    "nodiratime": "implied by noatime (the kernel shows only noatime)",
    "rw": "shown as rw",
    "auto": "fstab-only",
    "nouser": "fstab-only",
    "async": "the default",
    "device=": "btrfs: names the filesystem's other devices at mount, never listed",
}


@dataclass(frozen=True)
class FilesystemInfo:
    """A filesystem target as built and as the kernel sees it."""

    fstype: str
    device: str  # /dev/loopN
    major_minor: str  # what cgroup I/O limits are keyed by
    size_bytes: int
    mountpoint: str
    data_dir: str  # the subdirectory the server's OS user owns: use it as the target
    mkfs_options: tuple[str, ...]  # what the user asked for mkfs
    mkfs_argv: tuple[str, ...]  # the whole command pgrig ran (with the log device)
    mount_options_asked: tuple[str, ...]
    mount_options: str  # effective: per-mount then superblock options, from mountinfo
    options_not_shown: tuple[str, ...]  # asked, accepted, yet absent from the effective list
    log_device: str | None
    backing_file: str
    direct_io: bool  # the loop device reads/writes its backing file with O_DIRECT
    host_filesystem: str  # e.g. "ext4 on /dev/vda (mounted at /)"
    mountinfo_line: str
    details: str  # xfs_info or dumpe2fs -h, verbatim
    facts: dict[str, str] = field(default_factory=dict)  # parsed from details
    kernel_messages: tuple[str, ...] = ()
    loop_backed: bool = True
    stripes: tuple[str, ...] = ()  # the loop devices of a striped filesystem (btrfs raid0)
    io_devices: tuple[str, ...] = ()  # major:minor of each loop device holding the data
    details_tool: str = ""  # what printed ``details``, e.g. "xfs_info"

    @property
    def cap_devices(self) -> tuple[str, ...]:
        """What an I/O cap is written for: one per loop device the data is on."""
        return self.io_devices or (self.major_minor,)

    def describe(self) -> str:
        log = f", external log {self.log_device}" if self.log_device else ""
        mkfs = " ".join(self.mkfs_options) or "defaults"
        if self.stripes:
            each = self.size_bytes // len(self.stripes) // 2**20
            return (
                f"{self.fstype} raid0 over {', '.join(self.stripes)} ({len(self.stripes)} x "
                f"{each} MiB loop files on {self.host_filesystem}"
                f"{', O_DIRECT' if self.direct_io else ''}); mkfs {mkfs}; mounted "
                f"{self.mount_options}"
            )
        return (
            f"{self.fstype} on {self.device} ({self.size_bytes // 2**20} MiB loop file on "
            f"{self.host_filesystem}{', O_DIRECT' if self.direct_io else ''}{log}); "
            f"mkfs {mkfs}; mounted {self.mount_options}"
        )


def parse_xfs_info(text: str) -> dict[str, str]:
    """Key facts of ``xfs_info``: section-qualified ``key=value`` pairs.

    ``data.bsize``, ``data.sunit``, ``meta-data.agcount``, ``log.device`` ...
    (units as xfs_info prints them: sunit/swidth in filesystem blocks).
    """
    facts: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        head, sep, rest = line.partition("=")
        if not sep:
            continue
        if head.strip():
            section = head.strip()
            # "log      =internal log   bsize=4096": the words before the first key=value
            first_key = re.search(r"\s[\w-]+=", " " + rest)
            descriptor = (" " + rest)[: first_key.start() if first_key else None].strip()
            if descriptor:
                key = f"{section}.device" if section in ("meta-data", "log") else section
                facts[key] = descriptor
        for key, value in re.findall(r"([\w-]+)=([^\s,]+)", rest):
            facts.setdefault(f"{section}.{key}", value)
    return facts


def parse_dumpe2fs(text: str) -> dict[str, str]:
    """``dumpe2fs -h``: ``{"Block size": "4096", "RAID stride": "2", ...}``."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            facts[key.strip()] = " ".join(value.split())
    return facts


def xfs_facts(text: str) -> dict[str, str]:
    """The facts a report needs from ``xfs_info``, under names shared with ext4."""
    raw = parse_xfs_info(text)
    picked = {
        "block size": raw.get("data.bsize"),
        "allocation groups": raw.get("meta-data.agcount"),
        "stripe unit (blocks)": raw.get("data.sunit"),
        "stripe width (blocks)": raw.get("data.swidth"),
        "log": raw.get("log.device"),
        "log size (blocks)": raw.get("log.blocks"),
        "inode size": raw.get("meta-data.isize"),
        "reflink": raw.get("meta-data.reflink"),
    }
    return {k: v for k, v in picked.items() if v is not None}


def ext4_facts(text: str) -> dict[str, str]:
    raw = parse_dumpe2fs(text)
    features = raw.get("Filesystem features", "")
    picked = {
        "block size": raw.get("Block size"),
        "stride (blocks)": raw.get("RAID stride"),
        "stripe width (blocks)": raw.get("RAID stripe width"),
        "log": (
            f"external journal device {raw['Journal device']}"
            if "Journal device" in raw
            else ("internal journal" if "has_journal" in features.split() else "no journal")
        ),
        "journal size": raw.get("Total journal size") or raw.get("Journal size"),
        "inode size": raw.get("Inode size"),
        "features": features or None,
        "default mount options": raw.get("Default mount options"),
    }
    return {k: v for k, v in picked.items() if v is not None}


def effective_options(mount_options: str, super_options: str) -> list[str]:
    seen: dict[str, None] = {}
    for opt in f"{mount_options},{super_options}".split(","):
        if opt:
            seen.setdefault(opt, None)
    return list(seen)


def not_shown(asked: tuple[str, ...], effective: list[str]) -> tuple[str, ...]:
    """Asked options the kernel took but does not list (neither as given nor by name)."""
    names = {opt.split("=", 1)[0] for opt in effective}
    missing = []
    for opt in asked:
        if opt in effective or opt in IMPLIED or opt.split("=", 1)[0] + "=" in IMPLIED:
            continue
        if "=" in opt and opt.split("=", 1)[0] in names:
            continue  # shown with another spelling of the value (logbsize=256k -> 262144)
        missing.append(opt)
    return tuple(missing)


# What mkfs and the kernel print for an option they do not know; group 1 names it.
REFUSAL_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"unknown option (-\S+(?: \S+)?)"),  # mkfs.xfs
    re.compile(r"unrecognized option '([^']+)'"),  # getopt, a long option
    re.compile(r"invalid option -- '(\S+)'"),  # getopt
    re.compile(r"Bad option\(s\) specified: (\S+)"),  # mke2fs -E
    re.compile(r"Invalid filesystem option set: (\S+)"),  # mke2fs -O
    re.compile(r"Invalid mount option set: (\S+)"),  # mke2fs -o
    re.compile(r"Unknown parameter '([^']+)'"),  # kernel, new mount API (5.x+)
    re.compile(r'Unrecognized mount option "([^"]+)"'),  # kernel, old ext4
    re.compile(r"bad value for '([^']+)'"),
    re.compile(r"[Ii]nvalid (?:value|argument) for [^']*'([^']+)'"),
)


def refused_options(*texts: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for text in texts:
        for pattern in REFUSAL_PATTERNS:
            for match in pattern.finditer(text):
                found.setdefault(match.group(1).strip(), None)
    # mkfs.xfs reports a long option as "-" and a NUL too (unknown option -): the
    # getopt line names it
    return tuple(name for name in found if name.strip("-\x00"))
