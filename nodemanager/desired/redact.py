"""Keep Secret values out of messages (pure, no I/O).

A template error can quote a value: ``{{ node.configmaps[node.secrets.password] }}`` fails with
"has no attribute 'hunter2'". Such messages go to status, Events and logs, which every node and
many people read. So every spelling of every Secret value the template could see (as is, as a
Python or JSON string literal, base64, hex, and each line of a multi-line value) is replaced
before the message leaves. A value too short to replace safely withholds the whole message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

REDACTED = "<redacted>"
WITHHELD = "the message is withheld: it may contain a Secret value"
_MIN = 4  # shorter forms match too much ordinary text to be replaced, so they withhold


def _forms(value: str) -> set[str]:
    raw = value.encode()
    forms = {value, repr(value)[1:-1], json.dumps(value)[1:-1], base64.b64encode(raw).decode()}
    forms.add(raw.hex())
    forms.update(line.strip() for line in value.splitlines())
    return {f for f in forms if f}


def scrub(message: str, values: Iterable[object]) -> str:
    """``message`` with every form of each string in ``values`` replaced (or withheld)."""
    forms = set().union(*(_forms(v) for v in values if isinstance(v, str) and v))
    for form in sorted(forms, key=len, reverse=True):
        if form not in message:
            continue
        if len(form) < _MIN:
            return WITHHELD
        message = message.replace(form, REDACTED)
    return message
