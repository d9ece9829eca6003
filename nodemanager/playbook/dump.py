"""Serialise a playbook with yaml.safe_dump's rules, marking ConfigSet values ``!unsafe``.

Ansible evaluates Jinja2 in every string of a playbook. A ConfigSet value such as file content
``{{ lookup('pipe', 'id') }}`` must reach the host as those bytes, never run on it, so every
value that came from a ConfigSet is wrapped in ``Unsafe`` and, when it holds ``{{``, ``{%`` or
``{#`` (without them Ansible has nothing to evaluate), written with Ansible's ``!unsafe`` tag.
Values are data, never pasted into text, so no value can add a task.

ansible-core reads a ``!unsafe`` scalar with YAML's implicit typing even when it is quoted
(``!unsafe '0644'`` loads as the integer 420, ``!unsafe '<<'`` does not load at all). So a value
that implicit typing would turn into something other than a string is written as a plain
double-quoted string instead: such a value never contains ``{``, so Jinja2 has nothing to
evaluate in it. Every other value keeps ``!unsafe`` and a quoted or literal style, and a literal
block is never used for text holding line breaks YAML 1.1 knows beyond ``\\n`` (U+0085, U+2028,
U+2029, ``\\r``), which a block would turn into ``\\n``.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import yaml
from yaml.resolver import Resolver

STR_TAG = "tag:yaml.org,2002:str"
# Characters a literal block cannot carry unchanged.
_NOT_IN_BLOCK = ("\r", "\x85", "\u2028", "\u2029")
_RESOLVER = Resolver()
# What makes Ansible treat a string as a template (Jinja2's block, variable and comment starts).
_JINJA_STARTS = ("{{", "{%", "{#")


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
    pretty = False
    noqa_key = ""
    noqas: list[tuple[str, str]]


class _Pretty(yaml.SafeDumper):
    """The playbook as an Ansible team writes it (ansible-lint's yamllint settings): sequences
    indented below their key, no line past WIDTH where a line can be broken. PyYAML's own
    emitter: libyaml's cannot indent sequences. For `render`, not the agent's runs."""

    pretty = True
    noqa_key = ""
    noqas: list[tuple[str, str]]

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


# ansible-lint's line length (yamllint's, as ansible-lint configures it) is 160. PyYAML breaks a
# line at the first space past WIDTH (it does not look ahead), so WIDTH leaves room for a word.
WIDTH = 100
LINE_MAX = 150  # a block scalar's lines cannot be broken: longer ones go in double quotes
# A task key whose value is (rule, reason): written as a noqa comment line (rule -- reason) in
# the task (ansible-lint reads every comment in a task), never as a key.
NOQA = "__noqa__"


def implicit_tag(value: str) -> str:
    """The tag YAML 1.1 implicit typing (what ansible-core applies to ``!unsafe``) gives value."""
    return str(_RESOLVER.resolve(yaml.ScalarNode, value, (True, False)))  # type: ignore[no-untyped-call]


def _block_safe(value: str, pretty: bool = False) -> bool:
    return (
        "\n" in value
        and not (pretty and any(len(line) > LINE_MAX - 30 for line in value.split("\n")))
        and not any(c in value for c in _NOT_IN_BLOCK)
        and not any(line.endswith((" ", "\t")) for line in value.split("\n"))
    )


def _represent_unsafe(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    text = str(value)
    if not any(start in text for start in _JINJA_STARTS):
        # Ansible templates only what holds `{{`, `{%` or `{#`: this is a literal as it stands,
        # written as one (what a reader, and ansible-lint matching a name, expects).
        return _represent_str(dumper, text)
    if implicit_tag(text) != STR_TAG:
        # Ansible would retype it under !unsafe; quoted without a tag it stays this string.
        return dumper.represent_scalar(STR_TAG, text, style='"')
    # A long line in a block cannot be broken; in double quotes it can, and still reads back as
    # these characters.
    pretty = getattr(dumper, "pretty", False)
    style = (
        "|"
        if _block_safe(text, pretty)
        else '"'
        if _special(text) or (pretty and "\n" in text)
        else "'"
    )
    return dumper.represent_scalar("!unsafe", text, style=style)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # PyYAML quotes a plain string that would change type itself; it only gets the line breaks
    # beyond "\n" wrong outside double quotes. A long one is double-quoted when pretty: the one
    # style PyYAML breaks at the width (escaped line breaks), every character kept.
    if _special(value) or (getattr(dumper, "pretty", False) and len(value) > WIDTH):
        return dumper.represent_scalar(STR_TAG, value, style='"')
    return dumper.represent_str(value)


def _special(value: str) -> bool:
    return any(c in value for c in _NOT_IN_BLOCK) or not value.isprintable()


def _represent_dict(dumper: Any, value: dict[Any, Any]) -> yaml.Node:
    if NOQA in value:
        # A key no value can spell (a fresh nonce), replaced by its comment after dumping.
        dumper.noqas.append(value[NOQA])
        value = {
            (dumper.noqa_key if k == NOQA else k): (len(dumper.noqas) - 1 if k == NOQA else v)
            for k, v in value.items()
        }
    node: yaml.Node = dumper.represent_dict(value)
    return node


for _d in (_Dumper, _Pretty):
    _d.add_representer(Unsafe, _represent_unsafe)
    _d.add_representer(LongUnsafe, lambda dumper, value: _represent_unsafe(dumper, value.text))
    _d.add_representer(str, _represent_str)
    _d.add_representer(dict, _represent_dict)


def to_yaml(playbook: Any, *, pretty: bool = False) -> str:
    """The playbook as YAML text: deterministic (no key sorting surprises, stable order).
    ``pretty`` is `render`'s: what ansible-lint's production profile accepts (slower: PyYAML's
    own emitter)."""
    dumper: Any = _Pretty if pretty else _Dumper
    nonce = "nodemanager_noqa_" + secrets.token_hex(8)
    noqas: list[tuple[str, str]] = []

    class _Once(dumper):  # type: ignore[misc]
        noqa_key = nonce

    _Once.noqas = noqas
    text = yaml.dump(
        playbook,
        Dumper=_Once,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=WIDTH if pretty else 1000,
        indent=2,
        explicit_start=True,
    )
    if not noqas:
        return text

    def comment(match: re.Match[str]) -> str:
        rule, reason = noqas[int(match.group(2))]
        return f"{match.group(1)}# noqa: {rule} -- {reason}"

    return re.sub(rf"^( *){nonce}: (\d+)$", comment, text, flags=re.MULTILINE)
