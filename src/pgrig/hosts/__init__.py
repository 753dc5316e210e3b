"""Hosts: an Ansible-format inventory, an executor per host (local or SSH), the
preflight that refuses a host before anything is created, provisioning (docs/hosts.md).
Load from several hosts at once is ``pgrig.load``; watching a load host, ``pgrig.monitor.hosts``."""
