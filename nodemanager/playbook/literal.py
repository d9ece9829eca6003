"""Paths and link targets meant literally, though Ansible expands them.

Ansible's ``path`` parameters (copy's ``dest``, file's ``path`` and ``src``, purge's) go through
``os.path.expanduser(os.path.expandvars(value))`` in the module, in the module's environment.
A ConfigSet (and upstream) means ``$HOME`` and ``~`` as written. Both expansions are one pass
over what the environment holds, so an environment where each name stands for its own
spelling (``HOME=$HOME``; ``HOME=~`` for a leading ``~``) makes them leave the value as it is.
The task gets that environment (``environment:``); only the module's sees it. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# posixpath.expandvars's own pattern: $name or ${anything but a brace}.
_VAR = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NotLiteral(ValueError):
    """A value no environment keeps literal through Ansible's expansion."""


def literal_env(values: Iterable[str]) -> dict[str, str]:
    """The environment under which every one of ``values`` survives Ansible's expansion
    unchanged (empty when nothing would be expanded); NotLiteral when none exists."""
    env: dict[str, str] = {}

    def want(name: str, spelling: str) -> None:
        if not _NAME.match(name):
            return  # no environment holds such a name: expandvars leaves it
        if env.get(name, spelling) != spelling:
            raise NotLiteral(
                f"{env[name]!r} and {spelling!r} together: Ansible would expand one of them"
            )
        env[name] = spelling

    for value in values:
        for match in _VAR.finditer(value):
            word = match.group(1)
            want(word[1:-1] if word.startswith("{") else word, match.group(0))
        if value == "~" or value.startswith("~/"):
            want("HOME", "~")
        elif value.startswith("~"):
            raise NotLiteral(f"{value!r}: Ansible would expand a leading '~user'")
    return env
