"""Hosts: an Ansible-format inventory, an executor per host (local or SSH), the
preflight that refuses a host before anything is created, provisioning, and
load from several hosts at once (docs/hosts.md)."""
