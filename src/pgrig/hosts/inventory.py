"""Ansible-format inventories, INI or YAML: the file DBAs already keep.

Read: hosts, groups (``[name]`` / ``hosts:``), nested groups
(``[name:children]`` / ``children:``), group variables (``[name:vars]`` /
``vars:``), numeric host ranges (``db[01:03]``), and the connection variables
pgrig uses: ``ansible_host``, ``ansible_port``, ``ansible_user``,
``ansible_ssh_private_key_file`` (``ansible_ssh_host/port/user`` and
``ansible_private_key_file`` as their older spellings) and
``ansible_connection=local``. Variables apply from the outermost group in,
the host's own last, as in Ansible. Other variables are kept, unread.

Not read: Jinja templates, dynamic inventory scripts and plugins, vaults:
each is refused with its file and line (or key).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgrig import files
from pgrig.errors import UsageError

ALL, UNGROUPED = "all", "ungrouped"

_ALIASES = {
    "ansible_ssh_host": "ansible_host",
    "ansible_ssh_port": "ansible_port",
    "ansible_ssh_user": "ansible_user",
    "ansible_private_key_file": "ansible_ssh_private_key_file",
}
_NAME = re.compile(r"^[A-Za-z0-9_.:\[\]-]+$")
# Ansible's host ranges: numbers (zero padding kept) or single letters, an
# optional stride: db[01:03], x[a:c], web[1:9:2]
_RANGE = re.compile(r"\[(\d+|[a-zA-Z]):(\d+|[a-zA-Z])(?::(\d+))?\]")


@dataclass(frozen=True)
class Host:
    """One machine as pgrig reaches it."""

    name: str  # the inventory name
    address: str  # ansible_host, else the name
    port: int = 22
    user: str | None = None  # None: ssh's default (the current user)
    key_file: Path | None = None
    local: bool = False  # ansible_connection=local: no SSH, this machine
    become: bool | None = None  # ansible_become: False forbids sudo; None: as needed
    groups: tuple[str, ...] = ()
    where: str = ""  # "hosts.ini:4": where the host was defined, for messages

    def describe(self) -> str:
        if self.local:
            return f"{self.name} (this machine)"
        who = f"{self.user}@" if self.user else ""
        return f"{self.name} ({who}{self.address}:{self.port})"


@dataclass
class _Draft:
    """A host or group while the file is read."""

    where: str
    vars: dict[str, object] = field(default_factory=dict)  # YAML values or INI strings
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: Mapping[str, Host]
    groups: Mapping[str, tuple[str, ...]]  # group -> its hosts, nested groups' included

    def resolve(self, names: Iterable[str], what: str = "host") -> list[Host]:
        """Hosts named directly or through a group, in order, each once."""
        out: list[Host] = []
        for name in names:
            if name in self.hosts:
                members: Sequence[str] = (name,)
            elif name in self.groups:
                members = self.groups[name]
            else:
                raise self.unknown(name, what)
            out += [self.hosts[m] for m in members if self.hosts[m] not in out]
        return out

    def unknown(self, name: str, what: str) -> UsageError:
        known = sorted(self.hosts) + sorted(self.groups)
        # A server is one host: 'db9' meant host 'db1' rather than group 'db'.
        close = (what == "host" and difflib.get_close_matches(name, sorted(self.hosts), n=1)) or (
            difflib.get_close_matches(name, known, n=1)
        )
        hint = f"did you mean {close[0]!r}?" if close else f"it holds: {', '.join(known[:12])}"
        return UsageError(
            f"{what} {name!r} is neither a host nor a group in the inventory {self.path}",
            hint=hint,
        )


def load(path: Path) -> Inventory:
    """Read an INI or YAML inventory; which one is told by the content, as Ansible does."""
    if (why := files.not_a_file(path)) is not None:
        raise UsageError(
            f"inventory {path} {why}", hint="give the path of an Ansible inventory file"
        )
    try:
        # utf-8-sig: a BOM (Windows editors) read "a pattern? write it out" (issue 40.15)
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"inventory {path} cannot be read: {exc}") from None
    _refuse_unread(path, text)
    hosts, groups = (_read_yaml if _looks_yaml(text) else _read_ini)(path, text)
    _vars_beside(path, hosts, groups)
    read = _finish(path, hosts, groups)
    if not read.hosts:
        raise UsageError(
            f"inventory {path} holds no host",
            hint="list the hosts under a group: [db] then a line db1 ansible_host=10.0.0.5",
        )
    return read


def _refuse_unread(path: Path, text: str) -> None:
    """A vault or a dynamic-inventory script named as what it is: they read
    "'$ANSIBLE_VAULT;1.1;AES256' is not a host name" and "'json;' is not key=value"."""
    if text.startswith("$ANSIBLE_VAULT;"):
        raise UsageError(
            f"inventory {path} is encrypted with Ansible Vault, which pgrig does not open",
            hint=f"decrypt a copy: ansible-vault view {path} > hosts.plain.ini, and pass that",
        )
    if text.startswith("#!") or (path.stat().st_mode & 0o111 and path.suffix not in _STATIC):
        raise UsageError(
            f"inventory {path} is a dynamic-inventory script; pgrig reads static inventories only",
            hint=f"save what it lists: ansible-inventory -i {path} --list -y > hosts.yml,"
            " and pass hosts.yml",
        )


_STATIC = (".ini", ".yml", ".yaml", ".cfg", "")
# Ansible's spellings of a boolean variable (YAML gives Python's bools)
_BOOLEANS = {
    **dict.fromkeys(("true", "yes", "on", "1", "t", "y"), True),
    **dict.fromkeys(("false", "no", "off", "0", "f", "n"), False),
}


def _looks_yaml(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        return stripped == "---" or (not stripped.startswith("[") and stripped.endswith(":"))
    return False


def _expand(name: str, where: str) -> list[str]:
    """``db[01:03]`` -> db01, db02, db03 (Ansible keeps the zero padding)."""
    m = _RANGE.search(name)
    if m is None:
        if not _NAME.match(name) or "[" in name:
            raise UsageError(
                f"{where}: {name!r} is not a host name", hint="a pattern? write it out"
            )
        return [name]
    lo, hi, stride = m.group(1), m.group(2), int(m.group(3) or 1)
    letters = lo.isalpha()
    if letters != hi.isalpha() or stride < 1:
        raise UsageError(
            f"{where}: host range {m.group(0)} in {name!r} mixes a letter and a number, or has "
            "stride 0",
            hint="write [01:09], [a:f] or [1:9:2]",
        )
    first, last = (ord(lo), ord(hi)) if letters else (int(lo), int(hi))
    if first > last:
        raise UsageError(f"{where}: host range {m.group(0)} in {name!r} runs backwards")
    width = len(lo) if lo.startswith("0") else 0
    return [
        out
        for i in range(first, last + 1, stride)
        for out in _expand(
            name[: m.start()] + (chr(i) if letters else str(i).zfill(width)) + name[m.end() :],
            where,
        )
    ]


def _split_host_line(line: str, where: str) -> tuple[str, dict[str, str]]:
    """``db1:2222 ansible_user=x`` -> ("db1", {"ansible_port": "2222", "ansible_user": "x"})."""
    parts = line.split()
    name, values = parts[0], dict(_assignment(p, where) for p in parts[1:])
    if name.count(":") == 1 and name.rsplit(":", 1)[1].isdigit():
        name, port = name.rsplit(":", 1)
        values.setdefault("ansible_port", port)
    return name, values


def _assignment(text: str, where: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(
            f"{where}: {text!r} is not key=value",
            hint="host variables are written as ansible_host=10.0.0.5 after the host name",
        )
    if "{{" in value:
        raise UsageError(
            f"{where}: {key} uses a Jinja template, which pgrig does not expand",
            hint=f"write the value itself: {key}=10.0.0.5",
        )
    return key, value.strip("'\"")


def _read_ini(path: Path, text: str) -> tuple[dict[str, _Draft], dict[str, _Draft]]:
    hosts: dict[str, _Draft] = {}
    groups: dict[str, _Draft] = {ALL: _Draft(f"{path}"), UNGROUPED: _Draft(f"{path}")}
    section, kind = UNGROUPED, "hosts"
    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{path}:{lineno}"
        line = raw.split(" #")[0].strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)(?::(vars|children|hosts))?\]", line)
            if m is None:
                raise UsageError(
                    f"{where}: {line!r} is not a section header",
                    hint="write [group], [group:vars] or [group:children]",
                )
            section, kind = m.group(1), m.group(2) or "hosts"
            groups.setdefault(section, _Draft(where))
            continue
        group = groups[section]
        if kind == "vars":
            key, value = _assignment(line, where)
            group.vars[key] = value
        elif kind == "children":
            group.children.append(line.split()[0])
        else:
            name, values = _split_host_line(line, where)
            for one in _expand(name, where):
                _define(hosts, one, where, values)
                group.hosts.append(one)
    return hosts, groups


# What says where a host is: given twice with two values, one is a mistake.
_CONNECTION = ("ansible_host", "ansible_port", "ansible_user", "ansible_connection")


def _define(hosts: dict[str, _Draft], name: str, where: str, values: Mapping[str, object]) -> None:
    """A host line: the first, or another naming the same host (another group's
    member, as Ansible allows) that may not say it is somewhere else. The
    last address was taken silently, and the error pointed at the first line."""
    draft = hosts.get(name)
    if draft is None:
        hosts[name] = _Draft(where, dict(values))
        return
    for key in _CONNECTION:
        old, new = draft.vars.get(key), values.get(key)
        if old is not None and new is not None and str(old) != str(new):
            raise UsageError(
                f"{where}: host {name!r} is defined twice: {key}={new} here,"
                f" {key}={old} at {draft.where}",
                hint="give each machine one name (db1, db2), or one address for the name",
            )
    draft.vars.update(values)


def _read_yaml(path: Path, text: str) -> tuple[dict[str, _Draft], dict[str, _Draft]]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or exc
        raise UsageError(
            f"{at}: not valid YAML: {problem}",
            hint="YAML nests by indentation with spaces (no tabs), a colon after each group and"
            " host name (all:, hosts:, db1:); see docs/hosts.md for the layout",
        ) from None
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: a YAML inventory is a mapping of groups (all: {{hosts: ...}})",
            hint="see docs/hosts.md for the layout",
        )
    hosts: dict[str, _Draft] = {}
    groups: dict[str, _Draft] = {UNGROUPED: _Draft(str(path))}

    def mapping(value: object, key: str) -> dict[str, object]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise UsageError(
                f"{path}: {key} must be a mapping, not {type(value).__name__}",
                hint="hosts: and vars: hold name: value lines (db1: with its variables below)",
            )
        return value

    def group(name: str, body: object, key: str) -> None:
        draft = groups.setdefault(str(name), _Draft(f"{path}: {key}"))
        body = mapping(body, key)
        for extra in set(body) - {"hosts", "vars", "children"}:
            raise UsageError(
                f"{path}: {key}.{extra} is not a group key",
                hint="a group holds hosts:, vars: and children:",
            )
        for hname, hvars in mapping(body.get("hosts"), f"{key}.hosts").items():
            hkey = f"{key}.hosts.{hname}"
            for one in _expand(str(hname), f"{path}: {hkey}"):
                _define(hosts, one, f"{path}: {hkey}", _plain(mapping(hvars, hkey), hkey))
                draft.hosts.append(one)
        draft.vars.update(_plain(mapping(body.get("vars"), f"{key}.vars"), f"{key}.vars"))
        for cname, cbody in mapping(body.get("children"), f"{key}.children").items():
            draft.children.append(str(cname))
            group(str(cname), cbody, f"{key}.children.{cname}")

    def _plain(values: dict[str, object], key: str) -> dict[str, object]:
        for k, v in values.items():  # the INI form was refused; YAML took it as a name
            if "{{" in str(v):
                raise UsageError(
                    f"{path}: {key}.{k} uses a Jinja template ({v}), which pgrig does not expand",
                    hint=f"write the value itself: {k}: 10.0.0.5",
                )
        return values

    for name, body in data.items():
        group(str(name), body, str(name))
    groups.setdefault(ALL, _Draft(str(path)))
    return hosts, groups


def _vars_beside(path: Path, hosts: dict[str, _Draft], groups: dict[str, _Draft]) -> None:
    """``group_vars/`` and ``host_vars/`` beside the inventory, as Ansible reads
    them: ``NAME``, ``NAME.yml``, ``NAME.yaml`` or ``NAME.json``, or a directory
    ``NAME/`` of such files (in name order); over the inventory file's own
    variables of that group or host (issue 40.15: ignored, then exit 7 on the
    unresolved name)."""
    for kind, drafts in (("group_vars", groups), ("host_vars", hosts)):
        folder = path.parent / kind
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            name = entry.stem if entry.suffix in (".yml", ".yaml", ".json") else entry.name
            if name.startswith(".") or name not in drafts:
                continue  # a group or host this inventory does not hold
            found = sorted(entry.iterdir()) if entry.is_dir() else [entry]
            for file in found:
                if file.is_file() and not file.name.startswith("."):
                    drafts[name].vars.update(_vars_file(file, name, kind))


def _vars_file(path: Path, name: str, kind: str) -> dict[str, object]:
    import yaml

    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{kind} file {path} cannot be read: {exc}") from None
    if text.startswith("$ANSIBLE_VAULT;"):
        raise UsageError(
            f"{kind} file {path} is encrypted with Ansible Vault, which pgrig does not open",
            hint="decrypt the variables pgrig reads (ansible_host, ...) into a plain file "
            "beside it, or into the inventory",
        )
    try:
        data = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise UsageError(f"{kind} file {path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(
            f"{kind} file {path}: the variables of {name} are a mapping (ansible_host: ...)"
        )
    for k, v in data.items():
        if "{{" in str(v):
            raise UsageError(
                f"{kind} file {path}: {k} uses a Jinja template ({v}), which pgrig does not expand",
                hint=f"write the value itself: {k}: 10.0.0.5",
            )
    return {str(k): v for k, v in data.items()}


def _members(groups: Mapping[str, _Draft], name: str, seen: tuple[str, ...] = ()) -> list[str]:
    if name in seen:
        raise UsageError(
            f"{groups[name].where}: group {name!r} contains itself ({' > '.join((*seen, name))})",
            hint=f"remove {name} from the children of {seen[-1]}",
        )
    out = list(groups[name].hosts)
    for child in groups[name].children:
        if child not in groups:
            raise UsageError(
                f"{groups[name].where}: group {name!r} names a child group {child!r} that is "
                "not defined",
                hint=f"add a [{child}] section, or remove it from [{name}:children]",
            )
        out += [h for h in _members(groups, child, (*seen, name)) if h not in out]
    return out


def _finish(path: Path, drafts: dict[str, _Draft], groups: dict[str, _Draft]) -> Inventory:
    members = {g: _members(groups, g) for g in groups}
    grouped = {h for g, hs in members.items() if g not in (ALL, UNGROUPED) for h in hs}
    members[UNGROUPED] = [h for h in drafts if h not in grouped]
    members[ALL] = list(drafts)
    hosts: dict[str, Host] = {}
    for name, draft in drafts.items():
        in_groups = [g for g in groups if name in members[g]]
        # Outermost first: all, then groups by how many groups contain them.
        depth = {g: sum(g in _members_groups(groups, p) for p in groups) for g in in_groups}
        values: dict[str, object] = {}
        for g in sorted(in_groups, key=lambda g: (g != ALL, depth[g])):
            values.update(groups[g].vars)
        values.update(draft.vars)
        hosts[name] = _host(name, draft.where, values, tuple(in_groups))
    return Inventory(path, hosts, {g: tuple(hs) for g, hs in members.items()})


def _members_groups(groups: Mapping[str, _Draft], name: str) -> set[str]:
    """Every group nested (at any depth) inside ``name``."""
    out: set[str] = set()
    todo = list(groups[name].children)
    while todo:
        child = todo.pop()
        if child not in out and child in groups:
            out.add(child)
            todo += groups[child].children
    return out


def _host(name: str, where: str, values: Mapping[str, object], groups: tuple[str, ...]) -> Host:
    values = {_ALIASES.get(k, k): v for k, v in values.items()}
    port_text = str(values.get("ansible_port", 22))
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(
            f"{where}: host {name!r} has ansible_port={port_text!r}",
            hint="a TCP port is a whole number from 1 to 65535",
        )
    connection = str(values.get("ansible_connection", "ssh"))
    if connection not in ("ssh", "smart", "paramiko", "local"):
        raise UsageError(
            f"{where}: host {name!r} has ansible_connection={connection!r}",
            hint="pgrig reaches hosts over ssh, or 'local' for this machine",
        )
    key = values.get("ansible_ssh_private_key_file")
    user = values.get("ansible_user")
    # This machine without an address: its loopback ("cannot resolve db1" before).
    address = str(values.get("ansible_host", "127.0.0.1" if connection == "local" else name))
    if ":" in address:  # `hosts check` passed it, `run` failed (exit 7): refused in both now
        raise UsageError(
            f"{where}: host {name!r} has ansible_host={address}, an IPv6 address: pgrig's "
            "servers listen on, and admit their load hosts from, IPv4 addresses only",
            hint="give the host's IPv4 address, or a name that resolves to one",
        )
    become = values.get("ansible_become")
    if become is not None and str(become).lower() not in _BOOLEANS:
        raise UsageError(
            f"{where}: host {name!r} has ansible_become={become!r}",
            hint="ansible_become is true or false",
        )
    method = str(values.get("ansible_become_method", "sudo"))
    if method != "sudo" or str(values.get("ansible_become_user", "root")) != "root":
        raise UsageError(
            f"{where}: host {name!r} becomes root by "
            f"{method} as {values.get('ansible_become_user', 'root')}: pgrig uses sudo to root",
            hint="ansible_become_method=sudo (ansible_become_user=root), or ansible_user=root",
        )
    return Host(
        name=name,
        address=address,
        port=int(port_text),
        user=str(user) if user else None,
        key_file=Path(str(key)).expanduser() if key else None,
        local=connection == "local",
        become=None if become is None else _BOOLEANS[str(become).lower()],
        groups=groups,
        where=where,
    )
