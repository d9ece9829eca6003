"""Error text that stays the same from one retry to the next.

A message holding a random temporary path changed the status on every run, which woke the
agent again: a storm of Ansible runs and Events. Run-specific paths are replaced by
placeholders, so a repeat reads the same and the status (and the aggregated Event) stays put.
"""

from __future__ import annotations

import re

# Paths that differ on every run: our private run dirs, Ansible's temporary dirs and modules.
_UNSTABLE = [
    (re.compile(r"[^\s'\"]*nodemanager-run-[A-Za-z0-9_]+[^\s'\":,]*"), "<run dir>"),
    (re.compile(r"ansible-tmp-[0-9.]+-[0-9]+-[0-9]+"), "ansible-tmp-*"),
    (re.compile(r"AnsiballZ_(\w+)\.py"), r"AnsiballZ_\1.py"),
    (re.compile(r"ansible_[\w.]+_payload_[A-Za-z0-9_]+"), "ansible_payload_*"),
    (re.compile(r"/tmp/tmp[A-Za-z0-9_]{8}\b"), "/tmp/tmp*"),
    (re.compile(r"\.nm-tmp-[A-Za-z0-9_]+"), ".nm-tmp-*"),
]


def stable(message: str) -> str:
    """The message with run-specific temporary paths replaced, so a repeat reads the same."""
    for pattern, replacement in _UNSTABLE:
        message = pattern.sub(replacement, message)
    return message
