"""Ansible-format inventories: INI and YAML, groups, variables, and the errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import campaign
from pgrig.errors import UsageError
from pgrig.hosts import inventory

INI = """\
# a DBA's file
bastion ansible_connection=local

[db]
db1 ansible_host=10.0.0.5 ansible_user=admin
db2:2222

[load]
c[1:3] ansible_ssh_private_key_file=~/.ssh/bench

[load:vars]
ansible_user=bench
ansible_port=2200

[all:vars]
ansible_user=root

[bench:children]
db
load
"""

YAML = """\
all:
  vars:
    ansible_user: root
  hosts:
    bastion:
      ansible_connection: local
  children:
    bench:
      children:
        db:
          hosts:
            db1: {ansible_host: 10.0.0.5, ansible_user: admin}
            db2: {ansible_port: 2222}
        load:
          vars: {ansible_user: bench, ansible_port: 2200}
          hosts:
            c[1:3]:
              ansible_ssh_private_key_file: ~/.ssh/bench
"""


@pytest.mark.parametrize("text,suffix", [(INI, "ini"), (YAML, "yml")])
def test_ini_and_yaml_read_alike(tmp_path: Path, text: str, suffix: str) -> None:
    path = tmp_path / f"hosts.{suffix}"
    path.write_text(text)
    inv = inventory.load(path)
    assert sorted(inv.hosts) == ["bastion", "c1", "c2", "c3", "db1", "db2"]
    db1, db2, c2 = inv.hosts["db1"], inv.hosts["db2"], inv.hosts["c2"]
    assert (db1.address, db1.user, db1.port) == ("10.0.0.5", "admin", 22)
    assert (db2.address, db2.user, db2.port) == ("db2", "root", 2222)
    # group vars beat all's, the host's own beat the group's
    assert (c2.user, c2.port, c2.key_file) == ("bench", 2200, Path("~/.ssh/bench").expanduser())
    assert inv.hosts["bastion"].local and not db1.local
    assert [h.name for h in inv.resolve(["bench"])] == ["db1", "db2", "c1", "c2", "c3"]
    assert [h.name for h in inv.resolve(["c3", "load", "db1"])] == ["c3", "c1", "c2", "db1"]
    assert "bastion" in inv.groups["ungrouped"]


def test_zero_padded_range(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("[web]\nweb[08:10].example.com\n")
    assert list(inventory.load(path).hosts) == [
        "web08.example.com",
        "web09.example.com",
        "web10.example.com",
    ]


def test_unknown_name_suggests_the_closest(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(INI)
    with pytest.raises(UsageError) as err:
        inventory.load(path).resolve(["laod"], what="load_hosts entry")
    assert "load_hosts entry 'laod' is neither a host nor a group" in str(err.value)
    assert str(path) in str(err.value)
    assert err.value.hint == "did you mean 'load'?"
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    "text,message",
    [
        ("[db\ndb1\n", "hosts:1: '[db' is not a section header"),
        ("[db]\ndb1 ansible_port=ssh\n", "hosts:2: host 'db1' has ansible_port='ssh'"),
        ("[db]\ndb1 ansible_host\n", "hosts:2: 'ansible_host' is not key=value"),
        ("[a:children]\nb\n", "group 'a' names a child group 'b' that is not defined"),
        ("[a:children]\nb\n[b:children]\na\n", "group 'a' contains itself (a > b > a)"),
        ("[db]\ndb1 ansible_host={{ ip }}\n", "hosts:2: ansible_host uses a Jinja template"),
        ("[db]\ndb1 ansible_connection=docker\n", "ansible_connection='docker'"),
        ("all:\n  hosts: [db1]\n", "all.hosts must be a mapping, not list"),
        ("all:\n  host:\n    db1:\n", "all.host is not a group key"),
        ("all:\n  hosts:\n    db1: {a: [}\n", "hosts:3: not valid YAML"),
        # issue 32: each of these was taken for something else, or nothing
        (
            "all:\n  hosts:\n    db1:\n      ansible_host: '{{ db_address }}'\n",
            "all.hosts.db1.ansible_host uses a Jinja template ({{ db_address }})",
        ),
        (
            "all:\n  vars:\n    ansible_user: '{{ u }}'\n  hosts:\n    db1:\n",
            "all.vars.ansible_user",
        ),
        ("$ANSIBLE_VAULT;1.1;AES256\n6162636465\n", "is encrypted with Ansible Vault"),
        (
            "#!/usr/bin/env python3\nimport json; print(json.dumps({}))\n",
            "dynamic-inventory script",
        ),
        ("", "holds no host"),
        ("# nothing yet\n[db]\n", "holds no host"),
        (
            "[db]\ndb1 ansible_host=10.0.0.5\n[load]\ndb1 ansible_host=10.0.0.9\n",
            "hosts:4: host 'db1' is defined twice: ansible_host=10.0.0.9 here,"
            " ansible_host=10.0.0.5 at ",
        ),
    ],
)
def test_bad_files_name_file_line_and_host(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        inventory.load(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)
    assert err.value.hint, "each says what to do"


def test_a_host_in_two_groups_at_one_address_is_one_host(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text(
        "[db]\ndb1 ansible_host=10.0.0.5\n[load]\ndb1\n[big]\ndb1 ansible_host=10.0.0.5\n"
    )
    host = inventory.load(path).hosts["db1"]
    assert host.address == "10.0.0.5" and set(host.groups) >= {"db", "load", "big"}


def test_an_executable_inventory_is_named_a_script(tmp_path: Path) -> None:
    path = tmp_path / "inventory.py"
    path.write_text("print('{}')\n")
    path.chmod(0o755)
    with pytest.raises(UsageError, match="dynamic-inventory script"):
        inventory.load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="inventory .*nope.ini does not exist"):
        inventory.load(tmp_path / "nope.ini")


def test_an_unknown_server_host_suggests_the_closest_host_before_a_group(tmp_path: Path) -> None:
    """A server is one host: 'db9' is a typo of host 'db1' or 'db2' (as close
    as each other), not of group 'db' (which difflib alone ranks closer)."""
    path = tmp_path / "hosts.ini"
    path.write_text(INI)
    with pytest.raises(UsageError) as err:
        inventory.load(path).resolve(["db9"], what="host")
    assert err.value.hint in ("did you mean 'db1'?", "did you mean 'db2'?")
    with pytest.raises(UsageError) as err:
        inventory.load(path).resolve(["db9"], what="load_hosts entry")
    assert err.value.hint == "did you mean 'db'?", "load hosts are often a group"


def test_a_campaigns_inventory_that_does_not_exist_is_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[campaign]\nname = "x"\ninventory = "nosuch.ini"\n[[target]]\nname = "a"\nhost = "db1"\n'
    )
    with pytest.raises(UsageError) as err:
        campaign.load(path)
    said = str(err.value)
    assert f"{tmp_path / 'nosuch.ini'} does not exist" in said
    assert "c.toml" in said and "inventory" in said
    assert err.value.exit_code == 2


def test_group_vars_and_host_vars_beside_the_inventory(tmp_path: Path) -> None:
    """Issue 40.15: group_vars/ and host_vars/ beside the inventory were ignored
    (exit 7 on the unresolved name). Read as Ansible reads them: a file per
    group or host (.yml, .yaml, .json, none) or a directory of them, over the
    inventory's own variables; a host's over its groups'."""
    path = tmp_path / "hosts.ini"
    path.write_text("[db]\ndb1\n[load]\nc[a:c]\nweb[1:5:2]\n[load:vars]\nansible_port=2200\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("ansible_user: root\n")
    (tmp_path / "group_vars" / "load").mkdir()
    (tmp_path / "group_vars" / "load" / "net.yaml").write_text("ansible_port: 2222\n")
    (tmp_path / "group_vars" / "nosuch.yml").write_text("ansible_user: x\n")  # not a group here
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "db1").write_text("ansible_host: 10.0.0.5\nansible_become: false\n")
    (tmp_path / "host_vars" / "cb.json").write_text('{"ansible_host": "10.0.0.12"}')
    inv = inventory.load(path)
    assert sorted(inv.hosts) == ["ca", "cb", "cc", "db1", "web1", "web3", "web5"]
    db1 = inv.hosts["db1"]
    assert (db1.address, db1.user, db1.port, db1.become) == ("10.0.0.5", "root", 22, False)
    cb = inv.hosts["cb"]
    assert (cb.address, cb.port, cb.user) == ("10.0.0.12", 2222, "root")
    assert inv.hosts["ca"].address == "ca" and inv.hosts["ca"].become is None


def test_a_bom_is_read_past(tmp_path: Path) -> None:
    """Issue 40.15: a UTF-8 BOM got the hint "a pattern? write it out"."""
    path = tmp_path / "hosts.ini"
    path.write_bytes("\ufeff[db]\ndb1 ansible_host=10.0.0.5\n".encode())
    assert inventory.load(path).hosts["db1"].address == "10.0.0.5"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("db1 ansible_become=maybe", "ansible_become='maybe'"),
        ("db1 ansible_become_method=su", "becomes root by su as root: pgrig uses sudo"),
        ("x[a:3]", "mixes a letter and a number"),
        ("x[c:a]", "runs backwards"),
    ],
)
def test_become_and_ranges_refused_naming_the_line(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(f"[db]\n{line}\n")
    with pytest.raises(UsageError, match=None) as exc:
        inventory.load(path)
    assert says in exc.value.message and f"{path}:2" in exc.value.message
