"""Serialise a playbook with yaml.safe_dump's rules, marking ConfigSet values ``!unsafe``.

Ansible evaluates Jinja2 in every string of a playbook. A ConfigSet value such as file content
``{{ lookup('pipe', 'id') }}`` must reach the host as those bytes, never run on it, so every
value that came from a ConfigSet is wrapped in ``Unsafe`` and written with Ansible's ``!unsafe``
tag. Values are data, never pasted into text, so no value can add a task.
"""

from __future__ import annotations

from typing import Any

import yaml


class Unsafe(str):
    """A string from user input that Ansible must not template."""


class _Dumper(yaml.SafeDumper):
    pass


def _represent_unsafe(dumper: yaml.SafeDumper, value: Unsafe) -> yaml.Node:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) and "\r" not in value else None
    return dumper.represent_scalar("!unsafe", str(value), style=style)


_Dumper.add_representer(Unsafe, _represent_unsafe)


def to_yaml(playbook: Any) -> str:
    """The playbook as YAML text: deterministic (no key sorting surprises, stable order)."""
    return yaml.dump(
        playbook,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1000,
        explicit_start=True,
    )
