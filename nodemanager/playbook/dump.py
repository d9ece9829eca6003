"""Serialise a playbook with yaml.safe_dump's rules, marking ConfigSet values ``!unsafe``.

Ansible evaluates Jinja2 in every string of a playbook. A ConfigSet value such as file content
``{{ lookup('pipe', 'id') }}`` must reach the host as those bytes, never run on it, so every
value that came from a ConfigSet is wrapped in ``Unsafe`` and written with Ansible's ``!unsafe``
tag. Values are data, never pasted into text, so no value can add a task.

ansible-core reads a ``!unsafe`` scalar with YAML's implicit typing even when it is quoted
(``!unsafe '0644'`` loads as the integer 420, ``!unsafe '<<'`` does not load at all). So a value
that implicit typing would turn into something other than a string is written as a plain
double-quoted string instead: such a value never contains ``{``, so Jinja2 has nothing to
evaluate in it. Every other value keeps ``!unsafe`` and a quoted or literal style, and a literal
block is never used for text holding line breaks YAML 1.1 knows beyond ``\\n`` (U+0085, U+2028,
U+2029, ``\\r``), which a block would turn into ``\\n``.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.resolver import Resolver

STR_TAG = "tag:yaml.org,2002:str"
# Characters a literal block cannot carry unchanged.
_NOT_IN_BLOCK = ("\r", "\x85", "\u2028", "\u2029")
_RESOLVER = Resolver()


class Unsafe(str):
    """A string from user input that Ansible must not template."""


class LongUnsafe:
    """A long string from user input (a file's content) that Ansible must not template, held
    as the same object: an ``Unsafe`` is a str subclass, so making one copies the text (50 MB
    more for a 50 MB file, ``make bench BENCH=large``). Written exactly as ``Unsafe``."""

    __slots__ = ("text",)
    ABOVE = 1 << 20  # characters; shorter strings are simply ``Unsafe``

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LongUnsafe) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


# libyaml's emitter when present: the pure-Python one takes minutes for a 50 MB file's content.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc,valid-type]
    pass


def implicit_tag(value: str) -> str:
    """The tag YAML 1.1 implicit typing (what ansible-core applies to ``!unsafe``) gives value."""
    return str(_RESOLVER.resolve(yaml.ScalarNode, value, (True, False)))  # type: ignore[no-untyped-call]


def _block_safe(value: str) -> bool:
    return (
        "\n" in value
        and not any(c in value for c in _NOT_IN_BLOCK)
        and not any(line.endswith((" ", "\t")) for line in value.split("\n"))
    )


def _represent_unsafe(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    text = str(value)
    if implicit_tag(text) != STR_TAG:
        # Ansible would retype it under !unsafe; quoted without a tag it stays this string.
        return dumper.represent_scalar(STR_TAG, text, style='"')
    style = "|" if _block_safe(text) else '"' if _special(text) else "'"
    return dumper.represent_scalar("!unsafe", text, style=style)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # PyYAML quotes a plain string that would change type itself; it only gets the line breaks
    # beyond "\n" wrong outside double quotes.
    if _special(value):
        return dumper.represent_scalar(STR_TAG, value, style='"')
    return dumper.represent_str(value)


def _special(value: str) -> bool:
    return any(c in value for c in _NOT_IN_BLOCK) or not value.isprintable()


_Dumper.add_representer(Unsafe, _represent_unsafe)
_Dumper.add_representer(LongUnsafe, lambda dumper, value: _represent_unsafe(dumper, value.text))
_Dumper.add_representer(str, _represent_str)


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
